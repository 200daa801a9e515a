"""An elementwise function compiled by `name = torch.compile(fn)` and called
with tensors of ranks 1, 2, 3 (then a new size of rank 1): one graph per
rank.  The flatten cure's wrap form: `_fast_round = torch.compile(...)` and
an eager `fast_round` that flattens."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


def round_half(x):
    y = torch.round(x * 2.0) / 2.0
    return y.clamp(-4.0, 4.0)


fast_round = torch.compile(round_half, backend=counting_backend)

torch.manual_seed(0)
total = 0.0
for shape in ((16,), (4, 16), (2, 4, 16), (12,)):
    x = torch.randn(*shape) * 3
    total += float((fast_round(x) * torch.arange(x.numel()).reshape(shape)).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 3))
