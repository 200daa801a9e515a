# Reported, no fix (FR013). Measured (torch 2.13 CPU): the compiled forward
# appends to `self.hist` on every call; torch guards `len(self.hist)`, so
# 12 calls compile 8 graphs and hit the recompile limit (then eager).
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
model = torch.compile(Model())
for step in range(12):
    model(torch.randn(2, 4))
