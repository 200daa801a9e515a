# realworld: negative graphs=1
# Pattern: vllm-project/vllm-gaudi at 86bb66e7 (PR #1715), the twin of
# pos_global_op_filled_in_compiled_attention: `_ensure_fsdpa_cached()` fills
# `_CACHED_FSDPA_OP` at patch registration, before the layers are compiled,
# and the attention function calls it and raises if the op is still None, so
# the compiled code only ever sees the filled global.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 4 calls of 3 layers. FR014 must stay quiet: no compiled call
# fills the global.
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


def _ensure_fsdpa_cached() -> None:
    """Eagerly initialize the FusedSDPA operator cache.

    Must be called BEFORE torch.compile traces _hpu_sdpa_attention_forward,
    otherwise dynamo creates a guard on `_CACHED_FSDPA_OP is None` which
    fails at runtime and triggers recompilation.
    """
    global _CACHED_FSDPA_OP
    if _CACHED_FSDPA_OP is not None:
        return
    try:
        HPUFusedSDPA = kernels.fsdpa()
        _CACHED_FSDPA_OP = ModuleFusedSDPA(HPUFusedSDPA)
    except Exception:
        pass


def _hpu_sdpa_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None):
    # _CACHED_FSDPA_OP is initialized eagerly by _ensure_fsdpa_cached()
    # before torch.compile traces this function.
    _ensure_fsdpa_cached()
    if _CACHED_FSDPA_OP is None:
        raise RuntimeError("FSDPA op failed to initialize")
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


_ensure_fsdpa_cached()  # at patch registration (_patch_sdpa_attention_forward), before compiling
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
