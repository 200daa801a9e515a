"""vllm-gaudi 86bb66e7^ (PR #1715): `_CACHED_FSDPA_OP` lazily created inside the
compiled attention (vllm_gaudi/patches.py, `_hpu_sdpa_attention_forward`).

Trimmed CPU reproduction: the HPU FusedSDPA kernel is stood in by
`F.scaled_dot_product_attention`, the transformers helpers the function imports
are defined here, and the device test reads `_HPU_DEVICE_TYPE` ("cpu" here,
"hpu" in the real code) so the FusedSDPA branch runs on CPU.
"""
import types

import torch
import torch.nn.functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# --- stand-ins for the HPU runtime -------------------------------------------
_HPU_DEVICE_TYPE = "cpu"  # real code: query.device.type == "hpu"


class _Config:
    prompt_attn_impl = "fsdpa_impl"
    fp32_softmax = False


_CONFIG = _Config()


def get_config():  # vllm_gaudi.extension.runtime.get_config
    return _CONFIG


class FusedSDPA:  # habana_frameworks.torch.hpex.kernels.FusedSDPA (CPU stand-in)

    @staticmethod
    def apply(query, key, value, attn_mask, dropout_p, is_causal, scale, softmax_mode, recompute_mode,
              valid_sequence_lengths, padding_side, *rest):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale)


def _fsdpa():  # vllm_gaudi.extension.kernels.fsdpa
    return FusedSDPA


kernels = types.SimpleNamespace(fsdpa=_fsdpa)


class SlicedFusedSDPA(torch.nn.Module):  # vllm_gaudi.extension.utils (slicing off)
    enable_slicing = False
    slice_thld = 8192


class ModuleFusedSDPA(torch.nn.Module):  # vllm_gaudi.extension.utils

    def __init__(self, fusedSDPA):
        super().__init__()
        assert fusedSDPA is not None, f'fusedSDPA kernel is None'
        self._hpu_kernel_fsdpa = fusedSDPA
        self._sliced_module = SlicedFusedSDPA()

    def forward(self, query, key, value, attn_mask, dropout_p, is_causal, scale, softmax_mode, recompute_mode,
                valid_sequence_lengths, padding_side="left", window_size=None, sinks=None):
        if is_causal and attn_mask is not None:
            is_causal = False
            valid_sequence_lengths = None
        return self._hpu_kernel_fsdpa.apply(query, key, value, attn_mask, dropout_p, is_causal, scale, softmax_mode,
                                            recompute_mode, valid_sequence_lengths, padding_side, False, False,
                                            (-1, -1), sinks)


# --- transformers.integrations.sdpa_attention helpers (trimmed) ---------------
_is_torch_npu_available = False


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def use_gqa_in_sdpa(attention_mask, key, value):
    return False


ALL_ATTENTION_FUNCTIONS = {"sdpa": None}

# --- vllm_gaudi/patches.py before the fix ------------------------------------

# Global cache for FusedSDPA operator to avoid recreation overhead
_CACHED_FSDPA_OP = None


def _hpu_sdpa_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask,
    dropout: float = 0.0,
    scaling=None,
    is_causal=None,
    position_bias=None,
    **kwargs,
):
    sdpa_kwargs = {}
    if hasattr(module, "num_key_value_groups") and module.num_key_value_groups > 1:
        if not use_gqa_in_sdpa(attention_mask, key, value):
            key = repeat_kv(key, module.num_key_value_groups)
            value = repeat_kv(value, module.num_key_value_groups)
        else:
            sdpa_kwargs = {"enable_gqa": True}

    q_length = query.shape[2]
    kv_length = key.shape[2]

    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = q_length > 1 and attention_mask is None and is_causal

    if _is_torch_npu_available and attention_mask is not None and attention_mask.dtype != torch.bool:
        attention_mask = torch.logical_not(attention_mask.bool()).to(query.device)

    if is_causal and attention_mask is None and q_length > 1 and kv_length > q_length:
        key = key[:, :, :q_length, :]
        value = value[:, :, :q_length, :]

    # Check if we should use HPU FusedSDPA
    _use_hpu_fsdpa = False
    _config = None
    if query.device.type == _HPU_DEVICE_TYPE:
        try:
            _config = get_config()
            if _config.prompt_attn_impl == "fsdpa_impl":
                _use_hpu_fsdpa = True
        except Exception:
            pass

    if _use_hpu_fsdpa and _config is not None:
        global _CACHED_FSDPA_OP
        if _CACHED_FSDPA_OP is None:
            HPUFusedSDPA = kernels.fsdpa()
            _CACHED_FSDPA_OP = ModuleFusedSDPA(HPUFusedSDPA)

        softmax_mode = "fp32" if _config.fp32_softmax else "fast"
        attn_output = _CACHED_FSDPA_OP(
            query,
            key,
            value,
            attention_mask,
            dropout_p=dropout,
            is_causal=is_causal,
            scale=scaling,
            softmax_mode=softmax_mode,
            recompute_mode=True,
            valid_sequence_lengths=None,
        )
    else:
        attn_output = torch.nn.functional.scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=attention_mask,
            dropout_p=dropout,
            scale=scaling,
            is_causal=is_causal,
            **sdpa_kwargs,
        )

    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, None


def _patch_sdpa_attention_forward() -> None:
    ALL_ATTENTION_FUNCTIONS["sdpa"] = _hpu_sdpa_attention_forward


# --- a transformers vision encoder that dispatches to ALL_ATTENTION_FUNCTIONS --
class Gemma4VisionAttention(torch.nn.Module):

    def __init__(self, hidden, heads):
        super().__init__()
        self.num_heads = heads
        self.head_dim = hidden // heads
        self.scaling = self.head_dim**-0.5
        self.num_key_value_groups = 1
        self.is_causal = False
        self.q_proj = torch.nn.Linear(hidden, hidden)
        self.k_proj = torch.nn.Linear(hidden, hidden)
        self.v_proj = torch.nn.Linear(hidden, hidden)
        self.o_proj = torch.nn.Linear(hidden, hidden)

    def forward(self, hidden_states, attention_mask=None):
        b, s, _ = hidden_states.shape
        shape = (b, s, self.num_heads, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        attention_interface = ALL_ATTENTION_FUNCTIONS["sdpa"]
        attn_output, _ = attention_interface(self, q, k, v, attention_mask, dropout=0.0, scaling=self.scaling)
        return self.o_proj(attn_output.reshape(b, s, -1))


class Gemma4VisionEncoderLayer(torch.nn.Module):

    def __init__(self, hidden, heads):
        super().__init__()
        self.input_layernorm = torch.nn.LayerNorm(hidden)
        self.self_attn = Gemma4VisionAttention(hidden, heads)
        self.post_attention_layernorm = torch.nn.LayerNorm(hidden)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, 2 * hidden), torch.nn.GELU(),
                                       torch.nn.Linear(2 * hidden, hidden))

    def forward(self, hidden_states, attention_mask=None):
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states), attention_mask)
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class Gemma4VisionEncoder(torch.nn.Module):

    def __init__(self, hidden=16, heads=2, num_layers=3):
        super().__init__()
        self.layers = torch.nn.ModuleList(Gemma4VisionEncoderLayer(hidden, heads) for _ in range(num_layers))

    def forward(self, hidden_states, attention_mask=None):
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask)
        return hidden_states


# --- HPUModelRunner regional compilation (hpu_model_runner.py) ----------------
class HPUModelRunner:

    def __init__(self, model):
        self.model = model
        self.regional_compilation_layers_list = []

    def _regional_compilation(self, module, parent_module=None, module_name=None):
        if isinstance(module, torch.nn.ModuleList):
            for children_name, children_module in module.named_children():
                self._compile_region(module, children_name, children_module)
        elif any(isinstance(module, layer) for layer in self.regional_compilation_layers_list):
            self._compile_region(parent_module, module_name, module)
        else:
            for children_name, children_module in module.named_children():
                self._regional_compilation(children_module, module, children_name)

    def _compile_region(self, model, name, module):
        module = self._compile(module)
        setattr(model, name, module)

    def _compile(self, module):
        return torch.compile(module, backend=counting_backend, fullgraph=False)


torch.manual_seed(0)
_patch_sdpa_attention_forward()  # load_general_plugins -> patches.apply
runner = HPUModelRunner(Gemma4VisionEncoder().eval())
runner._regional_compilation(runner.model)

out = 0.0
with torch.no_grad():
    for step in range(4):  # warmup, then requests of the same (bucketed) shape
        pixels = torch.randn(1, 6, 16)
        out += runner.model(pixels).sum().item()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
