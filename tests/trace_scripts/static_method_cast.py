"""A compiled ``@staticmethod`` called through its class (compressed-tensors'
``FP4_E2M1_DATA.cast_to_fp4``, PR #331, reached from
``round_to_quantized_type`` for every layer's weight): each layer has its own
[out, in] shape, so dim 0 changes, then dim 1 (3 graphs: static, then
automatic dynamic once per dim).  The compile-site model reads the call
``FP4_E2M1_DATA.cast_to_fp4(tensor)`` as a call of the compiled function:
marking both dims of ``tensor`` before it leaves one graph."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class FP4_E2M1_DATA:
    max = 6.0

    @staticmethod
    @torch.compile(backend=counting_backend)
    def cast_to_fp4(x):
        sign = torch.sign(x)
        x = torch.abs(x)
        x[(x >= 0.0) & (x <= 0.25)] = 0.0
        x[(x > 0.25) & (x < 0.75)] = 0.5
        x[x >= 0.75] = 1.0
        return x * sign


def round_to_quantized_type(tensor):
    rounded = FP4_E2M1_DATA.cast_to_fp4(tensor)
    return rounded.to(tensor.dtype)


torch.manual_seed(0)
total = 0.0
for shape in ((64, 64), (32, 64), (128, 64), (64, 128)):  # q, k, gate, down of a layer
    weight = torch.randn(shape)
    total += float((round_to_quantized_type(weight) * weight).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 3))
