"""An int argument used as a range() bound in a compiled function: Python
control flow needs its value, so dynamo specialises it even under automatic
dynamic shapes (the guard comes from evaluate_expr)."""
import torch


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
@torch.compile(backend="eager")
def repeat_add(x, n):
    for _ in range(n):
        x = x + 1
    return x


x = torch.zeros(3)
total = 0.0
for n in range(1, 5):
    total += float(repeat_add(x, n).sum())
print("result:", round(total, 3))
