# The factory returns an instance of a class it makes at each call: caching
# it would hand every caller one module. Reported with the cure (define the
# class once, outside), no fix.
import torch
from torch import nn


def make_proj(n):
    class Proj(nn.Linear):
        pass

    return Proj(n, n)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = make_proj(4)

    def forward(self, x):
        return self.proj(x)


blocks = [Block() for _ in range(3)]
for block in blocks:
    block.compile()
