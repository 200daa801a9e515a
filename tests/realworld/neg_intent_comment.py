# realworld: negative graphs=2
# Pattern: karpathy/nanochat (scripts/base_train.py at
# 92d63d4e8bb4df75c3b71618f31ddde2378b2bcd, line 246: `model =
# torch.compile(model, dynamic=False) # the inputs to model will never change
# shape so dynamic=False is safe`) and KellerJordan/modded-nanogpt
# (train_gpt.py at f411b3d346aa52d3504324ca93c230fd84c6c07f, line 176:
# `@torch.compile(dynamic=False, fullgraph=True) # Must use dynamic=False or
# else it's much slower`): deliberate static compiles, said so in a comment,
# fed fixed shapes.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs (one per compiled function) over 10 steps; no recompile.
import torch
import torch.nn as nn


@torch.compile(dynamic=False, fullgraph=True, backend="eager")  # Must use dynamic=False or else it's much slower
def zeropower(G, steps: int = 3):
    X = G / (G.norm() + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        X = 1.5 * X - 0.5 * A @ X
    return X


torch.manual_seed(0)
model = nn.Linear(8, 8)
model = torch.compile(model, dynamic=False, backend="eager")  # the inputs to model will never change shape so dynamic=False is safe
batch = torch.randn(4, 8)
out = 0.0
for step in range(10):
    y = model(batch)
    out += zeropower(model.weight.detach()).sum().item() + y.sum().item()
print(round(out, 3))
