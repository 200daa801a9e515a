"""The same tensor passed for two arguments of a compiled function after a
first call with two (`mix(a, b)`, then `mix(h, h)`): the duplicate-tensor
guard recompiles (2 graphs)."""
import torch


@torch.compile(backend="eager")
def mix(x, y):
    return x * 2 + y


torch.manual_seed(0)
a, b = torch.randn(8), torch.randn(8)
total = float(mix(a, b).sum())
h = torch.randn(8)
for _ in range(2):
    total += float(mix(h, h).sum())
print("result:", round(total, 4))
