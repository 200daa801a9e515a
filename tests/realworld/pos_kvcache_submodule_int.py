# realworld: positive fix=safe graphs=8 limit
# Pattern: pytorch/torchtune before PR #1663 ("Fixing recompiles in KV-cache +
# compile", commit bae4b276d82f12d5bbc72138bfd40bb5b73f0c01):
# `KVCache.update` did `self.size += seq_len`, called from the attention
# layer's forward; torchtune/training/_compile.py compiles the layers in a loop
# (`for m in reversed(list(model.modules())): if isinstance(m,
# TransformerSelfAttentionLayer): m.compile(backend=backend)`). The int
# attribute of a submodule, changed by a method the compiled forward calls,
# recompiles every decode step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 decode steps x 2 layers share one code
# object); hand-fixed (`torch._dynamo.config.allow_unspec_int_on_nn_module =
# True` before compiling): 2 graphs, same output.
import torch
import torch.nn as nn


class KVCache(nn.Module):
    def __init__(self, max_len, dim):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(max_len, dim), persistent=False)
        self.size = 0

    def update(self, k):
        seq_len = k.shape[0]
        self.k_cache[self.size : self.size + seq_len] = k
        self.size += seq_len
        return self.k_cache


class Layer(nn.Module):
    def __init__(self, dim, max_len):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.kv_cache = KVCache(max_len, dim)

    def forward(self, x):
        k = self.proj(x)
        cache = self.kv_cache.update(k)
        return x + cache.sum(0, keepdim=True)


torch.manual_seed(0)
model = nn.Sequential(Layer(4, 16), Layer(4, 16))
for m in reversed(list(model.modules())):
    if isinstance(m, Layer):
        m.compile(backend="eager")  # expect: FR005

x = torch.randn(1, 4)
with torch.no_grad():
    for _ in range(12):
        x = torch.tanh(model(x))
print([round(v, 4) for v in x.flatten().tolist()])
