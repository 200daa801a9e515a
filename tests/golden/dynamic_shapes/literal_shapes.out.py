# golden: runtime
import torch


@torch.compile()
def mean_sq(x):
    return (x * x).mean()


print(round(float(mean_sq(torch.ones(3))), 4))
print(round(float(mean_sq(torch.ones(5))), 4))
print(round(float(mean_sq(torch.ones(7))), 4))
