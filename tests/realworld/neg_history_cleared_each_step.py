# realworld: negative graphs=1
# Pattern: a model that records a statistic of each forward in a list
# attribute (activation norms for logging), compiled whole, and a training
# loop that reads and clears the list after every step (the shape of the
# logging hooks of many training loops). The list is empty at every call:
# its length guard always holds.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 12 steps. FR013 must stay quiet: the module clears the list
# between calls.
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.norms = []

    def forward(self, x):
        y = self.lin(x)
        self.norms.append(y.detach().norm())
        return y


torch.manual_seed(0)
model = Model()
compiled = torch.compile(model)
logged = []
for step in range(12):
    compiled(torch.randn(4, 8)).sum().backward()
    logged.append(round(float(sum(model.norms)), 3))
    model.norms.clear()
print("logged", logged[-1])
