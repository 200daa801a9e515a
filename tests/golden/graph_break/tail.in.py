# golden: runtime=nodes
import torch


@torch.compile(dynamic=False)
def fn(x, c):
    y = x
    for _ in range(20):
        y = torch.sin(y) * 1.01 + y
    # fix-recompiles: graph-break
    return y.sum() + c


x = torch.linspace(0, 1, 16)
for c in range(6):
    print(c, round(float(fn(x, c)), 4))
