"""Recompiles on a dtype change: no rule cures it, the reason is shown raw."""
import torch


@torch.compile(backend="eager")
def plus_one(x):
    return x + 1


for dtype in (torch.float32, torch.float64, torch.int64):
    print("result:", plus_one(torch.ones(2, dtype=dtype)).sum().item())
