# golden: --unsafe-fixes --target-torch 2.12 runtime=limit_hits
import torch


@torch.compile(dynamic=False)
def scale(x, i):
    return x * (1.0 + 0.01 * i)


@torch.compile(dynamic=False)
def shift(x, i):
    return x + i


x = torch.ones(3)
for i in range(12):
    x = scale(x, i)
print([round(v, 4) for v in x.tolist()])
y = torch.ones(3)
for i in range(4):
    y = shift(y, i)
print([round(v, 4) for v in y.tolist()])
