# realworld: positive fix=safe graphs=8 limit
# Pattern: regional compilation of a model whose blocks carry their own index.
# pytorch/torchtitan torchtitan/distributed/compile.py (apply_compile) compiles
# each block on its own (`for layer_id, transformer_block in
# model.layers.named_children(): transformer_block.compile(backend=backend,
# fullgraph=True)`); karpathy/nanochat nanochat/gpt.py builds its blocks as
# `nn.ModuleList([Block(config, layer_idx) for layer_idx in
# range(config.n_layer)])` and keeps `self.layer_idx` in the attention module.
# Here forward uses the index arithmetically (a depth-scaled residual). The
# blocks share one forward code object; torch specialises int attributes of
# nn.Modules, so each block's index is a new guard: every block recompiles.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 blocks); hand-fixed
# (`torch._dynamo.config.allow_unspec_int_on_nn_module = True` before the
# compile loop): 2 graphs, same output.
import torch
import torch.nn as nn
from types import SimpleNamespace


class Block(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.mlp = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x):
        h = self.mlp(torch.tanh(x))
        return x + h * (2 * (self.layer_idx + 1)) ** -0.5


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([Block(config, layer_idx) for layer_idx in range(config.n_layer)])

    def forward(self, x):
        for block in self.layers:
            x = block(x)
        return x


torch.manual_seed(0)
config = SimpleNamespace(n_layer=12, n_embd=8)
model = GPT(config)
for layer_id, transformer_block in model.layers.named_children():
    transformer_block.compile(backend="eager")  # expect: FR005

x = torch.randn(2, config.n_embd)
with torch.no_grad():
    for _ in range(3):
        x = torch.tanh(model(x))
print([round(v, 4) for v in x.flatten().tolist()])
