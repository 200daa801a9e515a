import torch


class Scaled(torch.nn.Module):
    """An int attribute that forward only reads never changes: no recompile."""

    def __init__(self, factor: int = 3):
        super().__init__()
        self.factor = 3
        self.calls = 0

    def forward(self, x):
        return x * self.factor

    def reset(self):
        self.calls += 1


model = torch.compile(Scaled())
print(round(float(model(torch.ones(2)).sum()), 4))
