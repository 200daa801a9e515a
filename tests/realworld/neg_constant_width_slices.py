# realworld: negative graphs=1
# Pattern: karpathy/nanochat (scripts/base_train.py at
# 92d63d4e8bb4df75c3b71618f31ddde2378b2bcd: `model = torch.compile(model,
# dynamic=False)`; evaluation loops feed `val_inputs[i*mbs:(i+1)*mbs]`) and
# KellerJordan/modded-nanogpt: micro-batches cut with a constant width
# `x[i*mbs:(i+1)*mbs]` always have `mbs` rows, so the shape never changes.
# The tool must not call this varying input.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 8 micro-batches, no recompile.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
model = torch.compile(model, dynamic=False, backend="eager")

val_inputs = torch.randn(64, 8)
mbs = 8
total = 0.0
with torch.no_grad():
    for i in range(len(val_inputs) // mbs):
        total += model(val_inputs[i * mbs : (i + 1) * mbs]).sum().item()
print(round(total, 4))
