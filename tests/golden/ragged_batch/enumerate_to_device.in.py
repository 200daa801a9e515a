# golden: --unproven runtime
# The dataset's length is not visible here (a function parameter): the
# finding is reported only with --unproven. Measured (torch 2.13 CPU,
# counting backend; 50 samples, batch 16): 2 graphs; marked: 1.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, data, device, epochs=2):
    step_fn = torch.compile(model, dynamic=False)
    loader = DataLoader(TensorDataset(data), batch_size=16, shuffle=False)
    total = 0.0
    for epoch in range(epochs):
        for step, (x,) in enumerate(loader):
            x = x.to(device)
            with torch.no_grad():
                total += float(step_fn(x).sum())
    return total


torch.manual_seed(0)
print(round(train(nn.Linear(4, 3), torch.randn(50, 4), "cpu"), 4))
