# realworld: negative graphs=1
# The twin of pos_class_per_call_cross_module: the same ConvRot factory of
# unsloth's diffusion_convrot.py (a class per projection), but the whole
# model is compiled at once (`torch.compile(transformer)`), not its blocks
# one by one: the blocks' forwards are inlined into one frame, so no shared
# code object meets two classes. Nothing in the run compiles modules one by
# one, so FR019 has no evidence by default (reported only with --unproven).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1 graph.
import torch

from diffusion_convrot import rotate_linears_
from diffusion_speed import compile_whole
from transformer import Transformer

torch.manual_seed(0)
model = Transformer(num_layers=4).eval()
rotate_linears_(model, [f"blocks.{i}.proj" for i in range(4)], group_size=4)
model = compile_whole(model)
x = torch.randn(2, 8)
with torch.no_grad():
    out = model(x)
print(f"OUT {float(out.sum()):.5f}")
