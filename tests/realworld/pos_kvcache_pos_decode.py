# realworld: positive fix=safe graphs=8 limit
# Pattern: karpathy/nanochat (nanochat/engine.py `KVCache` and
# nanochat/gpt.py `GPT.forward` before 2bc521a6de8b04c8bbeaf8dc84bb67539e5b9245,
# "use orig_model in sampling"): the training script's
# `torch.compile(model, dynamic=False)` model also samples; `GPT.forward` reads
# `T0 = kv_cache.get_pos()` to slice the rotary table, and the attention's
# `kv_cache.insert_kv(...)` counts `self.pos` up inside the compiled call. A
# plain object's int, guarded on its value: under dynamic=False every decode
# position is a new graph, until the recompile limit. The cure (a tensor
# position, or sampling with the uncompiled model as nanochat did) is not a
# rewrite the tool can prove: FR016 reports it; and it is the evidence that
# the inputs of the `dynamic=False` compile vary, so FR001 removes
# `dynamic=False` (the int then turns dynamic after one recompile).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs and the limit over a prefill and 12 decode steps; FR001's fix: 2,
# the same output.
import torch
import torch.nn as nn
import torch.nn.functional as F


class KVCache:
    def __init__(self, num_layers, seq_len, dim):
        self.kv_shape = (num_layers, 2, seq_len, dim)
        self.kv_cache = None
        self.pos = 0  # current position in time in the cache

    def get_pos(self):
        return self.pos

    def insert_kv(self, layer_idx, k, v):
        if self.kv_cache is None:
            self.kv_cache = torch.zeros(self.kv_shape, dtype=k.dtype)
        T_add = k.size(0)
        t0, t1 = self.pos, self.pos + T_add
        self.kv_cache[layer_idx, 0, t0:t1] = k
        self.kv_cache[layer_idx, 1, t0:t1] = v
        # Increment pos after the last layer of the Transformer processes
        if layer_idx == self.kv_cache.size(0) - 1:
            self.pos = t1  # expect: FR016
        return self.kv_cache[layer_idx, 0, :t1], self.kv_cache[layer_idx, 1, :t1]


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x, cos, kv_cache):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k = q * cos, k * cos
        if kv_cache is not None:
            k, v = kv_cache.insert_kv(self.layer_idx, k, v)
        att = F.softmax(q @ k.T / k.size(-1) ** 0.5, dim=-1)
        return att @ v


class Block(nn.Module):
    def __init__(self, dim, layer_idx):
        super().__init__()
        self.attn = CausalSelfAttention(dim, layer_idx)

    def forward(self, x, cos, kv_cache):
        return x + self.attn(x, cos, kv_cache)


class GPT(nn.Module):
    def __init__(self, vocab=32, dim=16, n_layer=2, seq_len=64):
        super().__init__()
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(vocab, dim),
            "h": nn.ModuleList([Block(dim, i) for i in range(n_layer)]),
        })
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("cos", torch.cos(torch.arange(seq_len * 10, dtype=torch.float32))[:, None], persistent=False)

    def forward(self, idx, kv_cache=None):
        T = idx.size(0)
        T0 = 0 if kv_cache is None else kv_cache.get_pos()
        cos = self.cos[T0:T0 + T]
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x, cos, kv_cache)
        return self.lm_head(x)


torch.manual_seed(0)
orig_model = GPT()
model = torch.compile(orig_model, dynamic=False)  # expect: FR001
with torch.no_grad():
    cache = KVCache(num_layers=2, seq_len=64, dim=16)
    ids = torch.tensor([1, 5, 7, 3])
    logits = model(ids, kv_cache=cache)  # prefill
    out = []
    for _ in range(12):  # decode, one token at a time
        nxt = logits[-1:].argmax(-1)
        out.append(int(nxt))
        logits = model(nxt, kv_cache=cache)
print(out)
