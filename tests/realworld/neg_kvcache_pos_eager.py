# realworld: negative graphs=1
# Pattern: karpathy/nanochat after 2bc521a6de8b04c8bbeaf8dc84bb67539e5b9245
# ("use orig_model in sampling"): the same `KVCache` with a Python int `pos`,
# but the compiled model only trains; sampling, which counts `pos` up, runs
# the uncompiled `orig_model`. No compiled code reads or changes the int.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 4 training steps and a prefill with 12 decode steps.
import torch
import torch.nn as nn


class KVCache:
    def __init__(self, seq_len, dim):
        self.kv_cache = torch.zeros(seq_len, dim)
        self.pos = 0

    def get_pos(self):
        return self.pos

    def insert_kv(self, k):
        t0, t1 = self.pos, self.pos + k.size(0)
        self.kv_cache[t0:t1] = k
        self.pos = t1
        return self.kv_cache[:t1]


class GPT(nn.Module):
    def __init__(self, vocab=32, dim=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, kv_cache=None):
        x = self.wte(idx)
        if kv_cache is not None:
            x = x + kv_cache.insert_kv(x).mean(0)
        return self.lm_head(x)


torch.manual_seed(0)
orig_model = GPT()
model = torch.compile(orig_model)
opt = torch.optim.SGD(orig_model.parameters(), lr=0.1)
for _ in range(4):
    loss = model(torch.randint(0, 32, (8,))).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
with torch.no_grad():
    cache = KVCache(seq_len=64, dim=16)
    logits = orig_model(torch.tensor([1, 5, 7, 3]), kv_cache=cache)  # use orig_model to avoid recompilation
    out = []
    for _ in range(12):
        nxt = logits[-1:].argmax(-1)
        out.append(int(nxt))
        logits = orig_model(nxt, kv_cache=cache)
print(out, round(loss.item(), 4))
