# golden: runtime
import torch
from torch import compile


@compile(dynamic=False)
def energy(x):
    return (x * x).sum() / x.numel()


for n in range(1, 11):
    print(n, round(float(energy(torch.linspace(0, 1, n))), 4))
