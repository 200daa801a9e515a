"""Norm modules made by a factory that returns one of several classes
(NeMo Automodel's `initialize_rms_norm_module(impl, dim)`: `Float32RMSNorm`,
whose `forward` is compiled by its decorator, or `nn.RMSNorm`), fed batches
padded to a new length each step: the first call compiles the sequence
length static, the next recompiles (2 graphs).  The model cannot say which
class `self.input_layernorm` holds; the trace shows the factory's class's
forward called from those lines, so `maybe_mark_dynamic(x, 1)` goes before
the calls of every attribute the factory fills (1 graph)."""
import torch
from torch import nn


class Float32RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
    @torch.compile(fullgraph=True, backend="eager")
    def forward(self, x):
        input_dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * x).to(input_dtype)


def initialize_rms_norm_module(rms_norm_impl, dim, eps=1e-5):
    if rms_norm_impl == "torch":
        return nn.RMSNorm(dim, eps=eps)
    elif rms_norm_impl == "torch_fp32":
        return Float32RMSNorm(dim, eps=eps)
    raise ValueError(f"Unsupported RMSNorm implementation: {rms_norm_impl}")


class Block(nn.Module):
    def __init__(self, dim, rms_norm_impl):
        super().__init__()
        self.input_layernorm = initialize_rms_norm_module(rms_norm_impl, dim)
        self.proj = nn.Linear(dim, dim)
        self.post_attention_layernorm = initialize_rms_norm_module(rms_norm_impl, dim)

    def forward(self, x):
        x = x + self.proj(self.input_layernorm(x))
        return self.post_attention_layernorm(x)


torch.manual_seed(0)
block = Block(8, "torch_fp32")
total = 0.0
with torch.no_grad():
    for seq_len in (5, 7, 6, 9):
        total += float(block(torch.randn(2, seq_len, 8)).sum())
print(f"result: {total:.4f}")
