# golden: runtime
from torch import nn, ones
import torch


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n -= 1
        return x.cos() * self.n


m = Counter()
if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):
    torch._dynamo.config.allow_unspec_int_on_nn_module = True
m.compile()
for _ in range(12):
    print(round(float(m(ones(2)).sum()), 4))
