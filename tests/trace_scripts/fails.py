"""Recompiles, then fails with exit code 3: nothing may be changed."""
import sys

import torch


@torch.compile(backend="eager", dynamic=False)
def scale(x):
    return x * 2


for n in range(2, 6):
    scale(torch.ones(n))
sys.exit(3)
