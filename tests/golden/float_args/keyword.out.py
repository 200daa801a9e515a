# golden: runtime
# A loss weight that changes per epoch, passed by keyword.
import torch
import torch.nn.functional as F


@torch.compile
def mixed_loss(pred, target, weight):
    return weight * F.mse_loss(pred, target) + (1 - weight) * F.l1_loss(pred, target)


torch.manual_seed(0)
pred = torch.randn(8)
target = torch.randn(8)
for epoch in range(6):
    w = 0.9 ** epoch
    print(epoch, round(float(mixed_loss(pred, target, weight=torch.tensor(w, dtype=torch.float64))), 5))
