# realworld: positive fix=unsafe graphs=2
# Pattern: vllm-project/vllm-gaudi before 86bb66e7 (PR #1715,
# vllm_gaudi/patches.py): the attention function the regionally compiled
# layers call makes its FusedSDPA op on first use, `global _CACHED_FSDPA_OP;
# if _CACHED_FSDPA_OP is None: _CACHED_FSDPA_OP =
# ModuleFusedSDPA(kernels.fsdpa())`. The first compiled call is guarded on
# `G['_CACHED_FSDPA_OP'] is None` and fills it: the next call compiles again
# ("caused dynamo to create a guard on _CACHED_FSDPA_OP is None. After warmup
# populated the cache, this guard failed at runtime"). Here the layer's
# attention calls the function by name (vllm-gaudi reaches it through
# transformers' ALL_ATTENTION_FUNCTIONS, which only the trace shows). FR014
# skips the global while compiling, a local standing in for it; unsafe: the op
# comes from `kernels.fsdpa()`, a module-level object's method the analysis
# cannot prove pure.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 4 calls of 3 layers compiled one by one; with the unsafe fix 1,
# the same output.
import types

import torch
import torch.nn.functional as F


class FusedSDPA:  # habana_frameworks.torch.hpex.kernels.FusedSDPA (CPU stand-in)
    @staticmethod
    def apply(query, key, value, attn_mask, dropout_p, is_causal, scale):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale)


def _fsdpa():  # vllm_gaudi.extension.kernels.fsdpa
    return FusedSDPA


kernels = types.SimpleNamespace(fsdpa=_fsdpa)


class ModuleFusedSDPA(torch.nn.Module):  # vllm_gaudi.extension.utils
    def __init__(self, fusedSDPA):
        super().__init__()
        self._hpu_kernel_fsdpa = fusedSDPA

    def forward(self, query, key, value, attn_mask, dropout_p, is_causal, scale):
        return self._hpu_kernel_fsdpa.apply(query, key, value, attn_mask, dropout_p, is_causal, scale)


_CACHED_FSDPA_OP = None


def _hpu_sdpa_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None):
    global _CACHED_FSDPA_OP
    if _CACHED_FSDPA_OP is None:  # expect: FR014
        HPUFusedSDPA = kernels.fsdpa()
        _CACHED_FSDPA_OP = ModuleFusedSDPA(HPUFusedSDPA)
    attn_output = _CACHED_FSDPA_OP(query, key, value, attention_mask, dropout, False, scaling)
    return attn_output.transpose(1, 2).contiguous(), None


class VisionAttention(torch.nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.num_heads = heads
        self.head_dim = hidden // heads
        self.scaling = self.head_dim**-0.5
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.o_proj = torch.nn.Linear(hidden, hidden)

    def forward(self, hidden_states):
        b, s, _ = hidden_states.shape
        q, k, v = self.qkv(hidden_states).view(b, s, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        attn_output, _ = _hpu_sdpa_attention_forward(self, q, k, v, None, scaling=self.scaling)
        return self.o_proj(attn_output.reshape(b, s, -1))


class EncoderLayer(torch.nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)
        self.self_attn = VisionAttention(hidden, heads)

    def forward(self, hidden_states):
        return hidden_states + self.self_attn(self.norm(hidden_states))


torch.manual_seed(0)
layers = torch.nn.ModuleList(EncoderLayer(16, 2) for _ in range(3))
for i, layer in enumerate(layers):  # HPUModelRunner._regional_compilation
    layers[i] = torch.compile(layer, backend="eager")
total = 0.0
with torch.no_grad():
    for _ in range(4):
        x = torch.randn(1, 5, 16)
        for layer in layers:
            x = layer(x)
        total += float(x.sum())
print(f"result: {total:.4f}")
