# golden: --unsafe-fixes runtime=limit_hits
import torch


@torch.compile(dynamic=False)
def scale(x, c):
    return (x * c).sum()


total = 0.0
for epoch in range(2):
    for n in range(1, 11):
        total += float(scale(torch.ones(n), 0.5 * n))
print(round(total, 4))
