# golden: runtime
import torch
from torch import compile as c


def affine(x):
    return (3 * x + 1).mean()


fast = c(affine, dynamic=False)
for n in range(1, 11):
    print(n, round(float(fast(torch.ones(n, 2))), 4))
