# realworld: positive fix=safe graphs=6
# Pattern: huggingface/diffusers `ModelMixin.compile_repeated_blocks`
# (src/diffusers/models/modeling_utils.py, as in
# benchmarks/recall/wan_animate_contiguous_blocks): every submodule whose
# class name is listed in the model's `_repeated_blocks` is compiled one by
# one with `submod.compile()` -- the compiled class is named by a string
# (issue 27, form 8). Here the block keeps a Python int it counts up in
# `forward` (a step index for its own schedule), which torch specialises on an
# nn.Module: every step recompiles the block's code.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 6
# graphs over 6 steps of 2 blocks; FR005's fix
# (`allow_unspec_int_on_nn_module = True` before the compile): 2, same output.
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
                submod.compile(*args, **kwargs)  # expect: FR005
                has_compiled_region = True

        if not has_compiled_region:
            raise ValueError(f"Regional compilation failed because {repeated_blocks} classes are not found in the model. ")


class DenoiseBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.step_index = 0

    def forward(self, x):
        self.step_index += 1
        scale = 1.0 / self.step_index
        return x + scale * self.proj(x)


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
