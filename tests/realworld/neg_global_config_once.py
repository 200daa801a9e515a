# realworld: negative graphs=1
# Pattern: module-level hyperparameters (`WARMUP = 20`, `LR = 0.1`) set once
# and read inside the compiled step: the guard on the global's value always
# holds, so nothing recompiles; a global assigned once is config, not a
# changing value.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1 graph.
import torch

LR = 0.1
WARMUP = 20


@torch.compile
def scaled_update(w, g):
    return w - LR * g / WARMUP


torch.manual_seed(0)
w, g = torch.randn(8), torch.randn(8)
for step in range(12):
    w = scaled_update(w, g)
print(round(float(w.sum()), 4))
