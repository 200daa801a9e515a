# realworld: positive fix=safe graphs=8 limit
# Pattern: Dao-AILab/quack#150 "Handling recompile in apply rotary emb": a
# varlen model compiled with dynamic=False, fullgraph=True; the collator reads
# each packed batch's longest document out of a tensor
# (max_seqlen = lengths.max().item()) and passes it in, so every batch is a new
# int and a new graph (the guard `max_length_k == 496` failed each step).
# Cure: no dynamic=False (FR001's safe fix: 8 graphs + limit -> 2, same
# output), or bucket max_seqlen to a few values.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 batches).
import torch


class VarlenModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, cu_seqlens, max_seqlen):
        pos = torch.arange(max_seqlen, dtype=x.dtype)
        return self.proj(x) + pos.mean() + cu_seqlens[-1].to(x.dtype)


def collate(lengths):
    cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    return cu_seqlens


torch.manual_seed(0)
model = torch.compile(VarlenModel(), dynamic=False, fullgraph=False)  # expect: FR001
batches = [torch.tensor([4 + 2 * i, 7, i + 3, 10]) for i in range(12)]
total = 0.0
for lengths in batches:
    cu_seqlens = collate(lengths)
    max_seqlen = lengths.max().item()
    x = torch.ones(24, 8)
    total += model(x, cu_seqlens, max_seqlen).sum().item()
print("total", round(total, 3))
