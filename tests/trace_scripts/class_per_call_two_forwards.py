"""A factory makes a new nn.Linear subclass at every call (unsloth's
convrot_linear_class, run as the script itself: the type guard names
`__main__.scaled_linear_class.<locals>.ScaledLinear`), and two kinds of
blocks, each compiled one by one, get one per projection: both compiled
forwards fail the type guard of `self.proj`.  One finding (FR019, on the
factory) cures both code objects."""
import torch
from torch import nn


def scaled_linear_class():
    class ScaledLinear(nn.Linear):
        def forward(self, x):
            return nn.functional.linear(x, self.weight, self.bias) * 0.5

    return ScaledLinear


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.proj(x)) + x


class GatedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return torch.sigmoid(self.proj(x)) * x


torch.manual_seed(0)
blocks = [Block() for _ in range(3)] + [GatedBlock() for _ in range(3)]
for block in blocks:
    block.proj.__class__ = scaled_linear_class()
    # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
    block.compile(backend="eager")
x = torch.randn(2, 4)
with torch.no_grad():
    for layer in blocks:
        x = layer(x)
print("result:", round(float(x.sum()), 4))
