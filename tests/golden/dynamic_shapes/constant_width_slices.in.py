# Constant-width slices into a dynamic=False model (the validation loop of
# KellerJordan/modded-nanogpt, records/track_3_optimization): every slice is
# `mbs` wide, so every call sees one shape. Measured on torch 2.13: 1 graph.
# No finding, no change.
import torch

model = torch.compile(torch.nn.Linear(4, 4), dynamic=False)
val_inputs = torch.randn(32, 4)
mbs = 8
with torch.no_grad():
    for i in range(len(val_inputs) // mbs):
        out = model(val_inputs[i * mbs:(i + 1) * mbs])
        start = i * mbs
        end = start + mbs
        out = model(val_inputs[start:end])
