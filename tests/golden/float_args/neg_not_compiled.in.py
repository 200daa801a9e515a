import torch


def scale(x, c):
    return x * c


@torch.compile
def other(x):
    return x + 1


for i in range(5):
    scale(torch.ones(3), 0.5 * i)
    other(torch.ones(3))
