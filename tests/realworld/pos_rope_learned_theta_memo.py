# realworld: positive fix=unsafe graphs=2
# Pattern: the twin of pos_rope_freqs_memo (huggingface/diffusers before
# d94ad81b87, AnyFlow's `_freqs_cache = (cache_key, freqs)`) with a learned
# rope base, as rotary embeddings with a trainable theta keep it: the table
# memoised per device depends on `self.log_theta`, an nn.Parameter. dynamo
# guards `_freqs_cache is None` and the write inside the compiled call makes
# the second call recompile, as in the original; but here skipping the memo
# while compiling is not proven to keep the values (after an optimizer step
# the memo holds the old table, the graph would compute the new one), so
# FR014's fix is unsafe: reported, applied only with --unsafe-fixes.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 4 calls; with the unsafe fix 1, the same output (no training here).
import math

import torch


class RotaryPosEmbed(torch.nn.Module):
    def __init__(self, dim, max_seq_len):
        super().__init__()
        self.dim = dim
        self.max_seq_len = max_seq_len
        self.log_theta = torch.nn.Parameter(torch.tensor(math.log(10000.0)))
        self._freqs_cache = None

    def _build_freqs(self, device):
        cache_key = (device.type, str(device))
        if self._freqs_cache is not None and self._freqs_cache[0] == cache_key:
            return self._freqs_cache[1]
        inv = torch.exp(-self.log_theta * torch.arange(0, self.dim, 2, dtype=torch.float32, device=device) / self.dim)
        freqs = torch.outer(torch.arange(self.max_seq_len, device=device), inv)
        self._freqs_cache = (cache_key, freqs)  # expect: FR014
        return freqs

    def forward(self, seq_len, device):
        return self._build_freqs(device)[:seq_len]


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.rope = RotaryPosEmbed(8, 32)

    def forward(self, x):
        freqs = self.rope(x.shape[1], x.device)
        angles = torch.cat([freqs, freqs], dim=-1).to(x.dtype)
        return self.proj(x * torch.cos(angles) + x.flip(-1) * torch.sin(angles))


torch.manual_seed(0)
model = torch.compile(Model())
total = 0.0
with torch.no_grad():
    for step in range(4):
        total += model(torch.randn(2, 6, 8)).sum().item()
print(f"{total:.4f}")
