# golden: --target-torch 2.13 runtime
# Safe fix (FR014, the value proven a pure function of the key): diffusers' AnyFlow rope before d94ad81b87 (#13792).
# `_build_freqs` memoises its table in `self._freqs_cache = (key, freqs)`
# inside the compiled forward; torch guarded `self._freqs_cache is None`, so
# the second call recompiles for the cache-hit branch. Measured (torch 2.13
# CPU): 2 graphs over 4 calls; skipping the memo while compiling: 1, same values.
import torch


class RotaryPosEmbed(torch.nn.Module):
    def __init__(self, dim, max_seq_len):
        super().__init__()
        self.dim = dim
        self.max_seq_len = max_seq_len
        self._freqs_cache = None

    def _build_freqs(self, device):
        cache_key = (device.type, str(device))
        if not torch.compiler.is_compiling() and self._freqs_cache is not None and self._freqs_cache[0] == cache_key:
            return self._freqs_cache[1]
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.dim, 2, dtype=torch.float64, device=device) / self.dim))
        freqs = torch.outer(torch.arange(self.max_seq_len, device=device), inv)
        if not torch.compiler.is_compiling():
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
