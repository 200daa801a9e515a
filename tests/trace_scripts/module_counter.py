"""A module that counts its calls in forward."""
import torch


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


torch.manual_seed(0)
model = Counter()
# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
compiled = torch.compile(model, backend="eager")
x = torch.ones(2, 4)
total = 0.0
for _ in range(12):
    total += float(compiled(x).sum())
print("result:", round(total, 3), model.calls)
