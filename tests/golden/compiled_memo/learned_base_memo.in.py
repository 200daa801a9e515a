# No default fix (FR014, reported with an unsafe fix): the twin of tuple_memo
# whose table depends on a learned parameter (`self.log_theta`, an
# nn.Parameter an optimizer changes in place). The memo then holds a stale
# table after a step, and skipping it while compiling would compute a fresh
# one: the value is not a pure function of the key, so the fix is held back
# (applied only with --unsafe-fixes) and the file stays unchanged.
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
        self._freqs_cache = (cache_key, freqs)
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
