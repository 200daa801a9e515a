# realworld: negative graphs=1
# Twin of pos_repeated_blocks_by_name: diffusers' `compile_repeated_blocks`
# compiles the blocks named in `_repeated_blocks` one by one; these blocks
# keep no state they change, so the one code object serves both blocks and
# every step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 6 steps of 2 blocks.
import torch
import torch.nn as nn


class ModelMixin(nn.Module):
    _repeated_blocks = []

    def compile_repeated_blocks(self, *args, **kwargs):
        repeated_blocks = getattr(self, "_repeated_blocks", None)

        if not repeated_blocks:
            raise ValueError("`_repeated_blocks` attribute is empty. ")
        has_compiled_region = False
        for submod in self.modules():
            if submod.__class__.__name__ in repeated_blocks:
                submod.compile(*args, **kwargs)
                has_compiled_region = True

        if not has_compiled_region:
            raise ValueError(f"Regional compilation failed because {repeated_blocks} classes are not found in the model. ")


class DenoiseBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.scale = 0.5

    def forward(self, x):
        return x + self.scale * self.proj(x)


class DenoiseModel(ModelMixin):
    _repeated_blocks = ["DenoiseBlock"]

    def __init__(self, dim=8, depth=2):
        super().__init__()
        self.blocks = nn.ModuleList([DenoiseBlock(dim) for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


torch.manual_seed(0)
model = DenoiseModel()
model.compile_repeated_blocks()
x = torch.randn(2, 8)
with torch.no_grad():
    for _ in range(6):
        x = model(x)
print([round(v, 4) for v in x.flatten().tolist()])
