# A static compile the code says is deliberate (modded-nanogpt's
# `@torch.compile(dynamic=False, fullgraph=True)  # Must use dynamic=False or
# else it's much slower`): no default finding, no change (reported, with an
# unsafe fix, under --unproven).
import torch


@torch.compile(dynamic=False)  # must stay static: dynamic is much slower here
def polar(x):
    return x / (x.norm() + 1e-7)


for n in (64, 128, 256):
    polar(torch.ones(n))
