"""unsloth-zoo 040c05dd^ (PR #1003): `patch_Gemma4RMSNorm` compiles the patched
`Gemma4RMSNorm.forward` (a bound method reading `self.weight` / `self.with_scale`)
with `patch_function(..., fullgraph = True)` (dynamic = True), and sets it on the
class: every RMSNorm of the model shares that one compiled code object, so its
cache holds the product of the norm width (a Parameter: static even with
dynamic = True), the input rank (3 for residual norms, 4 for q/k/v norms),
`self.with_scale` and the input dtype.
(unsloth_zoo/temporary_patches/gemma4_float32.py, utils.py::patch_function)

Trimmed CPU reproduction: transformers' Gemma4 text model is stood in by a
2-layer model with the same norm placement (input / post-attention /
pre- and post-feedforward norms, q/k norms with scale, v norm without, a
wider head dim on the full-attention layer), fp16 weights and an fp32 residual
as under UNSLOTH_FORCE_FLOAT32.
"""
import functools
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


os.environ["UNSLOTH_FORCE_FLOAT32"] = "1"
UNSLOTH_COMPILE_DISABLE = False
torch_compile_options = {"epilogue_fusion": True, "max_autotune": False}  # unused with the counting backend


# --- transformers/models/gemma4/modeling_gemma4.py (trimmed) ----------------------
class Gemma4RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6, with_scale: bool = True):
        super().__init__()
        self.eps = eps
        self.with_scale = with_scale

        if self.with_scale:
            self.weight = nn.Parameter(torch.ones(dim), requires_grad=True)

    def _norm(self, hidden_states: torch.Tensor):
        mean_squared = hidden_states.pow(2).mean(-1, keepdim=True) + self.eps
        return hidden_states * torch.pow(mean_squared, -0.5)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        normed_output = self._norm(hidden_states.float())
        if self.with_scale:
            normed_output = normed_output * self.weight.float()
        return normed_output.type_as(hidden_states)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (x * cos) + (rotate_half(x) * sin)


class Gemma4TextConfig:
    vocab_size = 96
    hidden_size = 64
    intermediate_size = 128
    num_attention_heads = 2
    head_dim = 16
    global_head_dim = 32
    layer_types = ["sliding_attention", "full_attention"]
    rms_norm_eps = 1e-6


class Gemma4TextRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))

    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Gemma4TextAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.layer_type = config.layer_types[layer_idx]
        self.head_dim = config.global_head_dim if self.layer_type == "full_attention" else config.head_dim
        n = config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, n * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, n * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, n * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n * self.head_dim, config.hidden_size, bias=False)
        self.q_norm = Gemma4RMSNorm(dim=self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = Gemma4RMSNorm(dim=self.head_dim, eps=config.rms_norm_eps)
        self.v_norm = Gemma4RMSNorm(self.head_dim, eps=config.rms_norm_eps, with_scale=False)

    # unsloth_zoo's patch_Gemma4TextAttention forward (float32 q/k/v and scores), trimmed to SDPA
    def forward(self, hidden_states, position_embeddings=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)

        cos, sin = position_embeddings
        cos = cos.to(torch.float32)
        sin = sin.to(torch.float32)

        # q: fp16 proj -> fp16 q_norm -> float32 -> RoPE (float32) -> (b, h, q, d)
        query_states = self.q_proj(hidden_states).view(hidden_shape)
        query_states = self.q_norm(query_states).to(torch.float32)
        query_states = apply_rotary_pos_emb(query_states, cos, sin, unsqueeze_dim=2)
        query_states = query_states.transpose(1, 2).contiguous()

        key_states = self.k_proj(hidden_states).view(hidden_shape)
        value_states = self.v_proj(hidden_states).view(hidden_shape)

        key_states = self.k_norm(key_states).to(torch.float32)
        key_states = apply_rotary_pos_emb(key_states, cos, sin, unsqueeze_dim=2)
        key_states = key_states.transpose(1, 2).contiguous()

        value_states = self.v_norm(value_states).to(torch.float32)
        value_states = value_states.transpose(1, 2).contiguous()

        attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states, is_causal=True, scale=1.0)
        attn_output = attn_output.transpose(1, 2).reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output.to(torch.float16))


class Gemma4TextMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class Gemma4TextDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.self_attn = Gemma4TextAttention(config, layer_idx)
        self.mlp = Gemma4TextMLP(config)
        self.input_layernorm = Gemma4RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = Gemma4RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.pre_feedforward_layernorm = Gemma4RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_feedforward_layernorm = Gemma4RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings):
        residual = hidden_states                      # float32 residual highway
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, position_embeddings[self.self_attn.layer_type])
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.pre_feedforward_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = self.post_feedforward_layernorm(hidden_states)
        return residual + hidden_states


class Gemma4TextModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_scale = config.hidden_size ** 0.5
        self.layers = nn.ModuleList(Gemma4TextDecoderLayer(config, i) for i in range(len(config.layer_types)))
        self.norm = Gemma4RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = {"sliding_attention": Gemma4TextRotaryEmbedding(config.head_dim),
                           "full_attention": Gemma4TextRotaryEmbedding(config.global_head_dim)}
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids):
        # patched Gemma4TextScaledWordEmbedding: float32 residual stream
        hidden_states = self.embed_tokens(input_ids).to(torch.float32) * self.embed_scale
        position_ids = torch.arange(input_ids.shape[1])[None].expand(input_ids.shape[0], -1)
        position_embeddings = {k: rope(hidden_states, position_ids) for k, rope in self.rotary_emb.items()}
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings)
        hidden_states = self.norm(hidden_states)
        return self.lm_head(hidden_states).float()


# --- unsloth_zoo/temporary_patches/utils.py (trimmed) ----------------------------
def _fall_back_to_eager_on_recompile_limit(compiled_func, eager_func, label):
    """Run eager instead of dying when the recompile cache is exhausted."""
    errors = (torch._dynamo.exc.FailOnRecompileLimitHit,)
    state = {"warned": False, "eager": False}

    @functools.wraps(eager_func)
    def wrapper(*args, **kwargs):
        if state["eager"]:
            return eager_func(*args, **kwargs)
        try:
            return compiled_func(*args, **kwargs)
        except errors as e:
            state["eager"] = True
            return eager_func(*args, **kwargs)

    wrapper._unsloth_compiled_func = compiled_func
    wrapper._unsloth_fallback_state = state
    wrapper._unsloth_fallback_label = label
    return wrapper


def patch_function(
    target_obj,
    attr_name,
    new_func,
    force=False,
    store_original=True,
    match_level="strict",
    fullgraph=None,
    dynamic=True,
):
    """Patch a function/method on an object."""
    if not hasattr(target_obj, attr_name):
        return False

    original_func = getattr(target_obj, attr_name)

    # torch.compile if requested.
    if fullgraph is not None and type(fullgraph) is bool and not UNSLOTH_COMPILE_DISABLE:
        _eager_func = new_func
        new_func = torch.compile(
            new_func,
            fullgraph = fullgraph,
            dynamic = dynamic,
            backend = counting_backend,
        )
        if fullgraph:
            new_func = _fall_back_to_eager_on_recompile_limit(
                new_func, _eager_func,
                f"{getattr(target_obj, '__name__', target_obj)}.{attr_name}",
            )

    if store_original:
        setattr(target_obj, f"_original_{attr_name}", original_func)
    setattr(target_obj, attr_name, new_func)
    return True


# --- unsloth_zoo/temporary_patches/gemma4_float32.py (before the fix) -------------
def patch_Gemma4RMSNorm():
    if os.environ.get("UNSLOTH_FORCE_FLOAT32", "0") == "0": return

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor: # fp32 (residual) or fp16 (sub-layer)
        # Gemma4 scales by `weight` directly (no 1.0 + weight) and only when with_scale.
        x_fp32 = hidden_states.to(torch.float32)
        variance = x_fp32.pow(2).mean(-1, keepdim=True)
        normed_fp32 = x_fp32 * torch.pow(variance + self.eps, -0.5)
        if self.with_scale:
            normed_fp32 = normed_fp32 * self.weight.to(torch.float32)

        # Clamp to fp16 range before casting back so a large residual never becomes inf.
        fp16_max = torch.finfo(torch.float16).max
        return torch.clamp(normed_fp32, min = -fp16_max, max = fp16_max).to(torch.float16)
    pass
    patch_function(Gemma4RMSNorm, "forward", forward, fullgraph = True, match_level = "relaxed")


patch_Gemma4RMSNorm()


# --- a few fp16 training steps (UNSLOTH_FORCE_FLOAT32: fp16 weights, fp32 residual) ---
torch.manual_seed(0)
model = Gemma4TextModel(Gemma4TextConfig())
for name, p in model.named_parameters():
    if "norm" in name:
        p.data.normal_(1.0, 0.1)
model.half()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
total = 0.0
for step, seq_len in enumerate((12, 17, 9)):
    input_ids = torch.randint(0, Gemma4TextConfig.vocab_size, (2, seq_len))
    logits = model(input_ids)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    total += loss.item()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {total:.4f}")
