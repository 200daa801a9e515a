"""An int argument under dynamic=False, and a global that changes between calls."""
import torch

SHIFT = 0


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
@torch.compile(backend="eager", dynamic=False)
def add_n(x, n):
    return x + n


@torch.compile(backend="eager")
def shifted(x):
    return x + SHIFT


x = torch.ones(3)
total = 0.0
for i in range(4):
    SHIFT = i
    total += float(add_n(x, i).sum()) + float(shifted(x).sum())
print("result:", round(total, 3))
