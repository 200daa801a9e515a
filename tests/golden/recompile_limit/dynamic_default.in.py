# golden: --unsafe-fixes
import torch


@torch.compile
def step(x, i):
    return (x * i).sum()


for i in range(12):
    print(round(float(step(torch.ones(i)), 4)))
