# golden: runtime
# unsloth's ConvRot swap: every block's projection gets the class a factory
# makes at each call, the blocks are compiled one by one and share one
# compiled `forward`: each block's projection has a type of its own, so each
# block fails the type guard and compiles again. The class is made once.
import torch
from torch import nn

SCALE = 0.5


def scaled_linear_class():
    """The `nn.Linear` subclass that scales its output."""
    from torch.nn import functional as F

    class ScaledLinear(nn.Linear):
        scale: float = SCALE

        def forward(self, x):
            return F.linear(x, self.weight, self.bias) * self.scale

    return ScaledLinear


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.proj(x)) + x


torch.manual_seed(0)
blocks = [Block() for _ in range(4)]
for block in blocks:
    block.proj.__class__ = scaled_linear_class()
    block.compile()
x = torch.randn(2, 4)
for layer in blocks:
    x = layer(x)
print(round(float(x.sum()), 5))
