# realworld: positive fix=safe graphs=2
# Pattern: EMA of model weights with a warm-up decay (timm's ModelEmaV3 does
# `decay = min(self.decay, (1 + step) / (10 + step))`-style warm-up and
# `lerp_(model_v, weight=1. - decay)`; not in the seven pinned repos): the
# float weight changes every step and ends in `torch.lerp`, which takes a 0-d
# tensor weight with the same result. Issue 12 reports the fix is held back as
# unsafe although lerp is tensor arithmetic.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps; hand-fixed (`torch.tensor(1.0 - decay,
# dtype=torch.float64)`, also float32): 1 graph, same output.
import torch


@torch.compile(backend="eager")
def ema_update(ema, param, weight):
    return torch.lerp(ema, param, weight)


torch.manual_seed(0)
ema = torch.zeros(4)
param = torch.randn(4)
for step in range(10):
    decay = min(0.999, (1 + step) / (10 + step))
    ema = ema_update(ema, param, 1.0 - decay)  # expect: FR003
print([round(v, 4) for v in ema.tolist()])
