# golden: runtime
import torch


@torch.compile(dynamic=False)
def fn(x, c):
    return (x * c).sum()


for i in range(6):
    print(i, round(float(fn(torch.ones(4), torch.tensor(0.5 + i, dtype=torch.float64))), 4))
    print(i, round(float(fn(torch.ones(4), torch.tensor(i / 7, dtype=torch.float64))), 4))
