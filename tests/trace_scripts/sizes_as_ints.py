"""A compiled unpacker that takes the unpacked sizes as Python ints next to
the packed tensor (compressed-tensors' ``unpack_fp4_from_uint8(a, m, n)``
before 6bb69c17, called from ``decompress_weight`` with
``m, n = weight.shape``): each layer's weight has its own shape, so dim 0 of
``a`` and ``m`` change, then dim 1 and ``n`` (3 graphs).  Marking ``a``'s
dims cures nothing (the ints are specialised at their first value, then made
dynamic one recompile each); ``dynamic=True`` on the compile leaves one
graph."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


kE2M1ToFloat = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float32)


@torch.compile(fullgraph=True, backend=counting_backend)
def unpack_fp4_from_uint8(a, m, n, dtype=torch.float32):
    a_flat = a.flatten()
    high = (a_flat & 0xF0) >> 4
    low = a_flat & 0x0F
    combined = torch.stack((low, high), dim=1).flatten()
    signs = (combined & 0x08).to(torch.bool)
    abs_vals = (combined & 0x07).to(torch.long)
    values = kE2M1ToFloat[abs_vals] * torch.where(signs, -1.0, 1.0)
    return values.reshape(m, n).to(dtype=dtype)


def decompress_weight(weight):
    m, n = weight.shape
    return unpack_fp4_from_uint8(weight, m, n * 2)


torch.manual_seed(0)
total = 0.0
for shape in ((64, 32), (32, 32), (128, 32), (64, 64)):  # packed q, k, gate, down of a layer
    packed = torch.randint(0, 256, shape, dtype=torch.uint8)
    total += float(decompress_weight(packed).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 3))
