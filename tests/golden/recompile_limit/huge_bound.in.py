# golden: --unsafe-fixes
import torch


@torch.compile(dynamic=False)
def step(x, i):
    return (x * i).sum()


for i in range(1000):
    step(torch.ones(2), i)
