# golden: runtime
import torch


@torch.compile(dynamic=False)
def shift(x, c):
    return (x + c).sum()


x = torch.linspace(0, 1, 8)
print(round(float(shift(x, torch.tensor(0.5, dtype=torch.float64))), 4))
print(round(float(shift(x, torch.tensor(0.25, dtype=torch.float64))), 4))
print(round(float(shift(x, torch.tensor(0.75, dtype=torch.float64))), 4))
print(round(float(shift(x, torch.tensor(1.5, dtype=torch.float64))), 4))
