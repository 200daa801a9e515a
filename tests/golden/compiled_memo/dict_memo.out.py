# golden: runtime
# Safe fix (FR014, the value proven a pure function of the key): a position table memoised by length in a dict
# attribute, `self.cache[n] = table`, inside the compiled forward. torch
# guarded the key's absence (`___dict_contains`), so each call after a new
# length is filled recompiles for the hit branch. Measured (torch 2.13 CPU):
# lengths 6, 6, 6, 6: 2 graphs; skipping the memo while compiling: 1. With no
# --target-torch the fix spells `torch._dynamo.is_compiling()` (torch 2.1+).
import torch


class PositionTable(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.cache = {}

    def table(self, n):
        if not torch._dynamo.is_compiling() and n in self.cache:
            return self.cache[n]
        pos = torch.arange(n, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, self.dim, 2, dtype=torch.float32) * (-9.2 / self.dim))
        t = torch.cat([torch.sin(pos * div), torch.cos(pos * div)], dim=-1)
        if not torch._dynamo.is_compiling():
            self.cache[n] = t
        return t

    def forward(self, x):
        return x + self.table(x.shape[1])


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = PositionTable(8)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(self.pos(x))


torch.manual_seed(0)
model = torch.compile(Model())
total = 0.0
with torch.no_grad():
    for step in range(4):
        total += model(torch.randn(2, 6, 8)).sum().item()
print(f"{total:.4f}")
