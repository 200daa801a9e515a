# golden: runtime=nodes
import torch


@torch.compile(dynamic=False)
def fn(x, c, train=True):
    y = x
    for _ in range(15):
        y = torch.sin(y) + y * 0.5
    if train:
        y = y * 2
        # fix-recompiles: graph-break
        y = y + c
    return y.sum()


x = torch.linspace(0, 1, 8)
for c in range(5):
    print(c, round(float(fn(x, c)), 4))
