# No finding: the loop length is the same on every call.
import torch

N_ITERS = 4


@torch.compile
def refine(x, n):
    for _ in range(n):
        x = torch.tanh(x)
    return x


x = torch.ones(4)
for step in range(12):
    x = refine(x, N_ITERS)
