import torch


# dynamic=False on purpose: inputs never change shape, and max-autotune
# picks kernels for this exact size
@torch.compile(dynamic=False)
def step(x):
    return (x * 2).sum()


x = torch.ones(8)
for _ in range(10):
    print(round(float(step(x)), 4))
