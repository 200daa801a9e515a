# realworld: positive fix=safe graphs=8 limit
# Pattern: issue 12, form 9: a loop bound behind an attribute,
# `for i in range(self.n_layer)` with `n_layer` from a config namespace
# (nanoGPT-style `GPTConfig`; karpathy/nanochat nanochat/gpt.py at
# 92d63d4e8bb4df75c3b71618f31ddde2378b2bcd builds its blocks from
# `config.n_layer`), passing the layer index to a `dynamic=False` compiled
# block: one int per layer, 12 layers, more variants than the recompile limit
# (8). Both FR001 (remove `dynamic=False`: the int becomes dynamic) and FR006
# (raise the limit to the visible bound) are real findings here; FR001 is the
# safe cure, FR006's fix is unsafe by design.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 layer indices, 4 run eager); hand-fixed
# with FR006's cure (`cache_size_limit = max(cache_size_limit,
# self.n_layer)`): 12 graphs, no limit hit, same output (FR006's fix is unsafe
# by design: more compiles); with `dynamic=False` removed (FR001's cure): 2
# graphs, same output.
from types import SimpleNamespace

import torch


@torch.compile(dynamic=False, backend="eager")  # expect: FR001
def block(x, layer_idx):
    return torch.tanh(x * (1.0 + 0.01 * layer_idx))


class Model:
    def __init__(self, config):
        self.n_layer = config.n_layer

    def forward(self, x):
        for i in range(self.n_layer):  # expect: FR006
            x = block(x, i)
        return x


config = SimpleNamespace(n_layer=12, n_embd=8)
model = Model(config)
x = torch.ones(2, config.n_embd)
for _ in range(2):
    x = model.forward(x)
print(round(x.sum().item(), 4))
