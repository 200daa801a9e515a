# golden: runtime
import torch
from torch import nn


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = Counter()
        if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):
            torch._dynamo.config.allow_unspec_int_on_nn_module = True
        # compile in place (nn.Module.compile) on an attribute of another class
        self.model.compile()

    def step(self, x):
        return self.model(x)


trainer = Trainer()
x = torch.ones(2, 4)
for _ in range(12):
    print(round(float(trainer.step(x).sum()), 4))
