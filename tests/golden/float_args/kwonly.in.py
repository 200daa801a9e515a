# golden: runtime
# A keyword-only blend factor.
import torch


@torch.compile(dynamic=False)
def blend(a, b, *, alpha):
    return a * alpha + b * (1 - alpha)


a = torch.linspace(0, 1, 6)
b = torch.linspace(1, 2, 6)
for k in range(5):
    print(k, round(float(blend(a, b, alpha=k / 4).sum()), 5))
