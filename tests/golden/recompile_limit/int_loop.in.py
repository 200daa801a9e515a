# golden: --unsafe-fixes runtime=limit_hits
import torch


@torch.compile(dynamic=False)  # static shapes on purpose
def step(x, i):
    return (x * i + 1).sum()


x = torch.ones(3)
# one compiled variant per position
for i in range(12):
    print(i, round(float(step(x, i)), 4))
