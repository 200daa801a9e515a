# golden: runtime
# 113 samples in batches of 32: the last batch of each epoch has 17 rows.
# Measured (torch 2.13 CPU, counting backend): 2 graphs; with
# maybe_mark_dynamic(x, 0) before the call: 1 graph, same output.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
model = nn.Linear(8, 2)
compiled = torch.compile(model)
dataset = TensorDataset(torch.randn(113, 8), torch.randn(113, 2))
loader = DataLoader(dataset, batch_size=32)

total = 0.0
for epoch in range(3):
    for x, y in loader:
        torch._dynamo.maybe_mark_dynamic(x, 0)
        # forward
        out = compiled(x)
        total += float(((out - y) ** 2).mean())
print(round(total, 4))
