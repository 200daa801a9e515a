# golden: runtime=nodes
import torch


@torch.compile(dynamic=False)
def fn(x, a, b):
    y = x
    for _ in range(10):
        y = torch.sin(y) + y
    # fix-recompiles: graph-break
    y = y * a
    for _ in range(10):
        y = torch.cos(y) + y
    # fix-recompiles: graph-break
    return y.sum() + b


x = torch.linspace(0, 1, 8)
for b in range(4):
    print(b, round(float(fn(x, 2, b)), 4))
