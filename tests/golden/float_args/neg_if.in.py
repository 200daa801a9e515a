# The callee tests the float in a Python `if`: not rewritten by --fix.
import torch


@torch.compile
def maybe_scale(x, p):
    if p > 0.5:
        return x * 2
    return x


for i in range(5):
    maybe_scale(torch.ones(3), 0.25 * i)
