# golden: --unsafe-fixes
# Each call's class gets its own class attribute: with one class for all
# calls, the last one set would hold for every module. Reported with the
# cure (define the class once, outside, and give each module its value), no
# fix, even with --unsafe-fixes.
import torch
from torch import nn


def scaled_linear_class():
    class ScaledLinear(nn.Linear):
        def forward(self, x):
            return super().forward(x) * self.scale

    return ScaledLinear


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)


blocks = [Block() for _ in range(3)]
for i, block in enumerate(blocks):
    cls = scaled_linear_class()
    cls.scale = 1.0 / (i + 1)
    block.proj.__class__ = cls
    block.compile()
