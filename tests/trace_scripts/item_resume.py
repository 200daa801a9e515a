"""A graph break on .item(): the code after it runs in a resume frame that
specialises on the Python number .item() returned."""
import torch


@torch.compile(backend="eager")
def normalize(x, w):
    s = w.sum().item()
    return x / s


x = torch.ones(3)
total = 0.0
for step in range(5):
    total += float(normalize(x, torch.full((2,), 1.0 + step)).sum())
print("result:", round(total, 4))
