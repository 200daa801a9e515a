import torch


@torch.compile(dynamic=False)
def fn(x, c):
    for _ in range(2):
        for _ in range(10):
            x = torch.tanh(x) + x
        # fix-recompiles: graph-break
    return x.sum() + c


x = torch.linspace(0, 1, 8)
for c in range(5):
    print(c, round(float(fn(x, c)), 4))
