# realworld: positive fix=safe graphs=2
# Pattern: a training loop over a DataLoader without drop_last feeding a
# compiled model, the shape litgpt (PR #794) and torchtune (PR #1654) met and
# answered with `drop_last=True` for compiled runs; here on a synthetic
# TensorDataset as in the PyTorch and Lightning tutorials (1000 samples in
# batches of 64: the last batch of each epoch has 40 rows).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs (the 40-row batch recompiles); hand-fixed
# (`torch._dynamo.maybe_mark_dynamic(inputs, 0)` before the call): 1 graph,
# same output.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
features = torch.randn(1000, 20)
targets = (features.sum(dim=1, keepdim=True) > 0).float()
train_ds = TensorDataset(features, targets)
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)

model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 1))
compiled_model = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.BCEWithLogitsLoss()

for epoch in range(2):
    running = 0.0
    for inputs, labels in train_loader:
        optimizer.zero_grad()
        loss = loss_fn(compiled_model(inputs), labels)  # expect: FR007
        loss.backward()
        optimizer.step()
        running += loss.item()
    print(epoch, round(running, 3))
