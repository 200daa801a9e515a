# torch.full with an int fill is an int64 tensor: `label * smooth` with a
# float64 0-d tensor is float64, with a Python float float32 (found by an
# audit): the fix is unsafe, not safe.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
real_label = 1
netD = nn.Sequential(nn.Linear(16, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))


@torch.compile(backend="eager")
def discriminator_loss(real, smooth):
    # one-sided label smoothing (Salimans et al. 2016)
    label = torch.full((real.size(0),), real_label)
    output = netD(real).view(-1)
    return F.binary_cross_entropy_with_logits(output, label * smooth)


real = torch.randn(32, 16)
for epoch in range(4):
    smooth = 1.0 - 0.05 * epoch
    loss = discriminator_loss(real, smooth)
    print(f"epoch {epoch}: smooth {smooth:.2f} lossD {loss.item()}")
