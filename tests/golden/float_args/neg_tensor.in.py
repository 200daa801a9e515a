import torch


@torch.compile
def scale(x, c):
    return x * c


for i in range(5):
    scale(torch.ones(3), torch.tensor(0.5 * i))
    c = torch.full((), 0.25 * i)
    scale(torch.ones(3), c)
