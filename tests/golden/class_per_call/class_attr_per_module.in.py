# A scale set on each module's class (`type(module).out_scale = scale`):
# one cached class would give every block the last scale (found by an
# audit: 0.2345 -> 1.5891). Report only.
import torch
import torch.nn as nn
import torch.nn.functional as F


def scaled_linear_class():
    class ScaledLinear(nn.Linear):
        out_scale = 1.0

        def forward(self, x):
            return F.linear(x, self.weight, self.bias) * self.out_scale

    return ScaledLinear


def install_scaling(module, scale):
    module.__class__ = scaled_linear_class()
    type(module).out_scale = scale


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.proj(self.norm(x))


class Model(nn.Module):
    def __init__(self, dim=8, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])

    def compile_repeated_blocks(self, **kwargs):
        for submod in self.modules():
            if isinstance(submod, Block):
                submod.compile(**kwargs)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


torch.manual_seed(0)
model = Model()
blocks = model.blocks
for i, block in enumerate(blocks):
    install_scaling(block.proj, 1.0 / (i + 1))
model.compile_repeated_blocks(backend="eager")
x = torch.randn(2, 8)
with torch.no_grad():
    x = model(x)
print(round(float(x.sum()), 4))
