# golden: runtime
# Packed variable-length batches: the longest document of each batch is read
# out of a tensor and capped (`min(max_len, max(1, int(....item())))`, as
# microsoft/dion's k_comm before 72256d3), then passed to a model compiled
# with dynamic=False, which builds positions from it: a new graph every
# batch.  The cap (64) is above the recompile limit: it bounds nothing here.
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x, cu_seqlens, max_seqlen):
        pos = torch.arange(max_seqlen, dtype=x.dtype)
        return self.proj(x) + pos.mean()


torch.manual_seed(0)
model = torch.compile(Model(), dynamic=False)
batches = [torch.tensor([5 + i, 9, 3 * i + 1, 12]) for i in range(12)]
max_len = 64
total = 0.0
for lengths in batches:
    cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    max_seqlen = min(max_len, max(1, int(lengths.max().item())))
    x = torch.ones(16, 8)
    total += model(x, cu_seqlens, max_seqlen).sum().item()
print("total", round(total, 3))
