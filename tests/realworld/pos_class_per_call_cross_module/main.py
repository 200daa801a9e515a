# realworld: positive fix=safe graphs=4
# Pattern: unslothai/unsloth before 186e6cb5c1 (#8357), in its layout: the
# ConvRot factory and the `__class__` swap live in
# studio/backend/core/inference/diffusion_convrot.py (`convrot_linear_class`,
# `_install_rotation`, called per projection by `rotate_linears_`), the
# blocks are compiled one by one elsewhere (diffusion_speed.py ->
# diffusers' `ModelMixin.compile_repeated_blocks`). The factory's module has
# no compile of its own: the project index carries the evidence (modules
# compiled one by one in another module). The one-file form is
# tests/realworld/pos_convrot_class_per_call.py.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 4
# graphs (one per block: each projection has a class of its own); FR019's
# fix (`@functools.lru_cache(maxsize=None)` on the factory): 1, same output.
import torch

from diffusion_convrot import rotate_linears_
from diffusion_speed import compile_repeated_blocks_of
from transformer import Transformer

torch.manual_seed(0)
model = Transformer(num_layers=4).eval()
rotate_linears_(model, [f"blocks.{i}.proj" for i in range(4)], group_size=4)
compile_repeated_blocks_of(model)
x = torch.randn(2, 8)
with torch.no_grad():
    out = model(x)
print(f"OUT {float(out.sum()):.5f}")
