# realworld: negative graphs=1
# Pattern: pytorch/torchtune recipes (recipes/full_finetune_single_device.py
# builds `DataLoader(..., drop_last=True)` so a compiled model never sees a
# smaller last batch). Every batch has 64 rows: nothing to report.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1 graph.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
features = torch.randn(1000, 20)
targets = features.sum(dim=1, keepdim=True)
loader = DataLoader(TensorDataset(features, targets), batch_size=64, shuffle=True, drop_last=True)

model = torch.compile(nn.Linear(20, 1))
total = 0.0
with torch.no_grad():
    for epoch in range(2):
        for inputs, labels in loader:
            total += float(((model(inputs) - labels) ** 2).mean())
print(round(total, 3))
