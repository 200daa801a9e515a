import torch
from torch import nn


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


# Module.compile() compiles in place and returns None: the fresh instance can
# never be called, so this is not a compile site (nothing to report)
Counter().compile()
model = Counter().compile(dynamic=False)


class Holder:
    def __init__(self):
        # `self.other` is never assigned a module: not a known instance
        self.other.compile()
