# realworld: positive fix=safe graphs=2
# Pattern: pytorch/torchtune (torchtune/modules/loss/kd_losses.py at
# bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1: `self.fkl_loss =
# torch.compile(self.fkl_loss, ...)`; pytorch/torchtitan
# torchtitan/components/loss.py: `self.fn = torch.compile(self.fn, ...)`): a
# bound method compiled and stored on an attribute, later called through the
# attribute with a float that changes every step (a warm-up loss weight).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps; hand-fixed (weight as a float64 0-d tensor): 1, same
# output.
import torch
import torch.nn.functional as F


class WeightedLoss(torch.nn.Module):
    def __init__(self, warmup=10):
        super().__init__()
        self.warmup = warmup
        self._loss_fn = torch.compile(self._loss, backend="eager")

    def _loss(self, logits, labels, weight):
        return F.cross_entropy(logits, labels) * weight

    def forward(self, logits, labels, step):
        weight = min(1.0, step / self.warmup)
        return self._loss_fn(logits, labels, weight)  # expect: FR003


torch.manual_seed(0)
loss_mod = WeightedLoss()
logits = torch.randn(4, 6)
labels = torch.tensor([0, 1, 2, 3])
total = 0.0
for step in range(1, 11):
    total += loss_mod(logits, labels, step).item()
print(round(total, 4))
