"""A factory makes a new nn.Linear subclass at every call (unsloth's
convrot_linear_class), each block's projection gets one, and the blocks
compiled one by one share one compiled forward: the type guard of
`self.proj` fails for every block."""
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


torch.manual_seed(0)
blocks = [Block() for _ in range(5)]
for block in blocks:
    block.proj.__class__ = scaled_linear_class()
    # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
    block.compile(backend="eager")
x = torch.randn(2, 4)
with torch.no_grad():
    for layer in blocks:
        x = layer(x)
print("result:", round(float(x.sum()), 4))
