# golden: --unsafe-fixes
import torch


def body(x, i):
    return (x * i).sum()


step = torch.compile(body, dynamic=False, recompile_limit=16)
for i in range(12):
    print(round(float(step(torch.ones(2), i)), 4))
