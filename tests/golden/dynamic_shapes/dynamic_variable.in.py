import torch

flag = False


@torch.compile(dynamic=flag)
def step(x):
    return (x * 2).sum()


for n in range(1, 11):
    print(round(float(step(torch.ones(n))), 4))
