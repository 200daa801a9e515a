# golden: runtime
# Safe fix (FR014, the value proven a pure function of the key): diffusers' QwenImage rope before 4a9dbd56f6 (#12061).
# The miss branch fills `self.rope_cache[rope_key]` and the value is read
# back after the `if`. A local dict stands in for the memo: the attribute
# itself in eager runs, a fresh `{}` while compiling (nothing guarded, nothing
# written). Measured (torch 2.13 CPU): 2 graphs over 3 calls of one shape; 1
# after the fix, the same output.
import torch


class EmbedRope(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.rope_cache = {}

    def forward(self, frame, height, width):
        rope_key = f"{frame}_{height}_{width}"
        rope_cache = {} if torch._dynamo.is_compiling() else self.rope_cache
        if rope_key not in rope_cache:
            n = frame * height * width
            inv = 1.0 / (10000.0 ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
            rope_cache[rope_key] = torch.outer(torch.arange(n, dtype=torch.float32), inv)
        vid_freqs = rope_cache[rope_key]
        return vid_freqs


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.pos_embed = EmbedRope(8)

    def forward(self, x):
        freqs = self.pos_embed(1, 4, 4)
        return self.lin(x * torch.cos(torch.cat([freqs, freqs], dim=-1)))


torch.manual_seed(0)
model = torch.compile(Model())
total = 0.0
with torch.no_grad():
    for step in range(3):
        total += model(torch.randn(2, 16, 8)).sum().item()
print(f"{total:.4f}")
