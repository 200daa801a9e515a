# golden: runtime
import torch


def total(x):
    return (x + 1).sum()


for n in range(1, 11):
    print(n, round(float(torch.compile(total, dynamic=False)(torch.ones(n))), 4))
