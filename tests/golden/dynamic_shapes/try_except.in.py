# golden: runtime
import torch


def total(x):
    return (x * x).sum()


try:
    fast = torch.compile(total, dynamic=False)
except Exception:  # an old torch without compile
    fast = total

for n in range(1, 11):
    print(n, round(float(fast(torch.ones(n))), 4))
