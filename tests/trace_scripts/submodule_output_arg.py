"""A compiled norm is called on a submodule's output (NeMo Automodel
c4e9a6c3: `self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))`, the norm's
`forward` compiled by its decorator): the first batch compiles it static,
the next sequence length recompiles it dynamic (2 graphs).  The mark for
its input goes on the submodule's output, bound to a name before the
statement (nothing before it in the statement has an effect): 1 graph."""
import torch
from torch import nn


class Float32RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
    @torch.compile(backend="eager")
    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, dim, rank):
        super().__init__()
        self.q_a_proj = nn.Linear(dim, rank)
        self.q_a_layernorm = Float32RMSNorm(rank)
        self.q_b_proj = nn.Linear(rank, dim)

    def forward(self, x):
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        return q


torch.manual_seed(0)
attn = Attention(8, 4)
total = 0.0
with torch.no_grad():
    for seq_len in (5, 7, 6, 9):
        total += float(attn(torch.randn(2, seq_len, 8)).sum())
print(f"result: {total:.4f}")
