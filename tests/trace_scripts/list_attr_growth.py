"""A compiled forward that appends to a list attribute on every call: torch
guards `len(self.hist)`, 8 graphs and the limit over 12 calls (FR013)."""
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.hist = []

    def forward(self, x):
        y = self.lin(x)
        self.hist.append(y.detach().sum())
        return y


torch.manual_seed(0)
model = torch.compile(Model(), backend="eager")
total = 0.0
for step in range(12):
    total += float(model(torch.ones(2, 4)).sum())
print("result:", round(total, 4))
