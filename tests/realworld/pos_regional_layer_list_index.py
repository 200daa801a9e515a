# realworld: positive fix=none graphs=8 limit
# Pattern: regional compilation (pytorch/torchtune torchtune/training/_compile.py
# compile_model: `for m in reversed(list(model.modules())): if isinstance(m,
# TransformerSelfAttentionLayer): m.compile(backend=backend)`) of blocks that
# carry their own index (`Block(config, layer_idx) for layer_idx in
# range(config.n_layer)`, as karpathy/nanochat nanochat/gpt.py builds them)
# and use it to index a per-layer Python list from the config (per-layer
# residual scales kept as a list, not a tensor). Each block's index is a new
# guard on the shared forward code, and the list element is a constant baked
# into the graph: every block recompiles.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 blocks); with
# `torch._dynamo.config.allow_unspec_int_on_nn_module = True` still 8 graphs
# and the limit (a Python list indexed by a dynamic int is specialised per
# index), so the flag is no cure: report only. Keeping the scales in a
# buffer and indexing it cures it (measured: 2 graphs with the flag).
import torch
import torch.nn as nn
from types import SimpleNamespace


class Block(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.resid_scales = config.resid_scales
        self.mlp = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x):
        h = self.mlp(torch.tanh(x))
        return x + h * self.resid_scales[self.layer_idx]


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([Block(config, layer_idx) for layer_idx in range(config.n_layer)])

    def forward(self, x):
        for block in self.layers:
            x = block(x)
        return x


torch.manual_seed(0)
n_layer = 12
config = SimpleNamespace(n_layer=n_layer, n_embd=8, resid_scales=[1.0 / (i + 1) for i in range(n_layer)])
model = GPT(config)
for m in reversed(list(model.modules())):
    if isinstance(m, Block):
        m.compile(backend="eager")  # expect: FR005

x = torch.randn(2, config.n_embd)
with torch.no_grad():
    for _ in range(3):
        x = torch.tanh(model(x))
print([round(v, 4) for v in x.flatten().tolist()])
