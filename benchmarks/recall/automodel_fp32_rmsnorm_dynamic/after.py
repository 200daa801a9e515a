"""NVIDIA-NeMo/Automodel c4e9a6c3 (PR #1555): `Float32RMSNorm.forward` compiled with
`@torch.compile(fullgraph=True, dynamic=True)` (nemo_automodel/components/models/common/utils.py).

Trimmed CPU reproduction of a DeepSeek-V3 (MLA) model built with
`BackendConfig(rms_norm="torch_fp32")`, fine-tuned on padded batches whose
sequence length changes from batch to batch (SQuAD-style collate).
"""
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# --- nemo_automodel/components/models/common/utils.py ------------------------
@dataclass
class BackendConfig:
    attn: str = "sdpa"
    linear: str = "torch"
    rms_norm: str = "torch_fp32"
    rope_fusion: bool = False


class Float32RMSNorm(nn.Module):
    """RMSNorm with explicit fp32 computation for training stability.

    Weights stay in the model's dtype (e.g. bf16) for FSDP2 compatibility.
    Inputs are upcast to fp32, norm is computed in fp32, and the output
    is cast back to the original input dtype.
    """

    def __init__(self, dim, eps=1e-5, device=None, dtype=torch.bfloat16):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def reset_parameters(self):
        torch.nn.init.ones_(self.weight)

    @torch.compile(fullgraph=True, dynamic=True, backend=counting_backend)
    def forward(self, x):
        input_dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * x).to(input_dtype)


def initialize_rms_norm_module(
    rms_norm_impl: str,
    dim: int,
    eps: float = 1e-5,
    device=None,
    dtype: torch.dtype = torch.bfloat16,
) -> nn.Module:
    if rms_norm_impl == "torch":
        return nn.RMSNorm(dim, eps=eps, device=device, dtype=dtype)
    elif rms_norm_impl == "torch_fp32":
        return Float32RMSNorm(dim, eps=eps, device=device, dtype=dtype)
    else:
        raise ValueError(f"Unsupported RMSNorm implementation: {rms_norm_impl}")


def initialize_linear_module(linear_impl, in_features, out_features, bias=False, device=None, dtype=torch.bfloat16):
    if linear_impl == "torch":
        return nn.Linear(in_features, out_features, bias=bias, device=device, dtype=dtype)
    raise ValueError(f"Unsupported Linear implementation: {linear_impl}")


# --- nemo_automodel/components/attention/utils.py (sdpa branch) ---------------
def initialize_attn_module_and_func(attn_impl, num_attention_heads, num_qk_channels, num_v_channels, softmax_scale,
                                    attn_mask_type="causal", qkv_format="bshd", num_gqa_groups=None, **kwargs):
    defaults = dict(scale=softmax_scale, is_causal=attn_mask_type == "causal",
                    enable_gqa=num_gqa_groups is not None, **kwargs)

    def attn_func(*args, **call_kwargs):
        merged = {**defaults, **call_kwargs}
        return F.scaled_dot_product_attention(*args, **merged)

    return None, attn_func


def preprocess_args_and_kwargs_for_attn(q, k, v, attention_mask, attn_impl, **kwargs):
    attn_kwargs = {}
    q = q.transpose(1, 2).contiguous()
    k = k.transpose(1, 2).contiguous()
    v = v.transpose(1, 2).contiguous()
    attn_kwargs["is_causal"] = True
    return q, k, v, attn_kwargs


def postprocess_output_for_attn(x, attn_impl):
    return x.transpose(1, 2).contiguous()


# --- nemo_automodel/components/models/deepseek_v3/rope_utils.py ---------------
def precompute_freqs_cis(qk_rope_head_dim, max_seq_len, rope_theta, rope_scaling):
    dim = qk_rope_head_dim
    base = rope_theta
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))


def apply_rotary_emb(x, freqs_cis, qkv_format="bshd", unsqueeze_dim=None):
    dtype = x.dtype
    x = torch.view_as_complex(x.float().view(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(x.size(0), x.size(1), 1, x.size(-1))
    y = torch.view_as_real(x * freqs_cis).flatten(3)
    return y.to(dtype)


def apply_rotary_emb_qk(q, k, freqs_cis, format="bshd", rope_fusion=False, cu_seqlens=None, cp_size=1, cp_rank=0):
    q = apply_rotary_emb(q, freqs_cis, qkv_format=format)
    k = apply_rotary_emb(k, freqs_cis, qkv_format=format)
    return q, k


@torch.no_grad()
def freqs_cis_from_position_ids(position_ids, freqs, qkv_format="bshd", for_fused_rope=False, cp_size=1):
    freqs = freqs.to(device=position_ids.device)
    angles = torch.einsum("bt,d->btd", position_ids.to(dtype=torch.float32), freqs)
    return torch.polar(torch.ones_like(angles), angles)


# --- nemo_automodel/components/models/deepseek_v3/layers.py -------------------
class MLA(nn.Module):
    def __init__(self, config, backend: BackendConfig):
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.q_lora_rank = config.q_lora_rank
        self.kv_lora_rank = config.kv_lora_rank
        self.qk_nope_head_dim = config.qk_nope_head_dim
        self.qk_rope_head_dim = config.qk_rope_head_dim
        self.qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
        self.v_head_dim = config.v_head_dim

        self.backend = backend
        self.rope_fusion = backend.rope_fusion
        linear_impl = backend.linear
        rms_norm_impl = backend.rms_norm
        hidden_size = config.hidden_size

        self.q_a_proj = initialize_linear_module(linear_impl, hidden_size, self.q_lora_rank, bias=False)
        self.q_a_layernorm = initialize_rms_norm_module(
            rms_norm_impl=rms_norm_impl, dim=self.q_lora_rank, eps=config.rms_norm_eps
        )
        self.q_b_proj = initialize_linear_module(linear_impl, self.q_lora_rank, self.n_heads * self.qk_head_dim)
        self.kv_a_proj_with_mqa = initialize_linear_module(
            linear_impl, hidden_size, self.kv_lora_rank + self.qk_rope_head_dim
        )
        self.kv_a_layernorm = initialize_rms_norm_module(
            rms_norm_impl=rms_norm_impl, dim=self.kv_lora_rank, eps=config.rms_norm_eps
        )
        self.kv_b_proj = initialize_linear_module(
            linear_impl, self.kv_lora_rank, self.n_heads * (self.qk_nope_head_dim + self.v_head_dim)
        )
        self.o_proj = initialize_linear_module(linear_impl, self.n_heads * self.v_head_dim, hidden_size)
        self.softmax_scale = self.qk_head_dim**-0.5
        self.attn_module, self.attn_func = initialize_attn_module_and_func(
            attn_impl=backend.attn,
            num_attention_heads=self.n_heads,
            num_qk_channels=self.qk_head_dim,
            num_v_channels=self.v_head_dim,
            softmax_scale=self.softmax_scale,
        )

    def forward(self, x, freqs_cis, attention_mask=None, **attn_kwargs: Any):
        qkv_format = "bshd"
        bsz, local_seq_len, _ = x.size()

        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.view(bsz, local_seq_len, self.n_heads, self.qk_head_dim)
        q_nope, q_pe = torch.split(q, [self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)

        kv = self.kv_a_proj_with_mqa(x)
        kv, k_pe = torch.split(kv, [self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        kv = self.kv_a_layernorm(kv)

        head_unsqueeze_dim = 2
        k_pe = k_pe.unsqueeze(head_unsqueeze_dim)
        q_pe, k_pe = apply_rotary_emb_qk(q_pe, k_pe, freqs_cis, format=qkv_format, rope_fusion=self.rope_fusion)
        k_pe = k_pe.squeeze(head_unsqueeze_dim)

        q = torch.cat([q_nope, q_pe], dim=-1)

        kv = self.kv_b_proj(kv)
        kv = kv.view(bsz, local_seq_len, self.n_heads, self.qk_nope_head_dim + self.v_head_dim)
        k_pe = k_pe.unsqueeze(2).expand([bsz, local_seq_len, self.n_heads, self.qk_rope_head_dim])

        k_nope, v = torch.split(kv, [self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        k = torch.cat([k_nope, k_pe], dim=-1)

        q, k, v, _attn_kwargs = preprocess_args_and_kwargs_for_attn(
            q, k, v, attention_mask, self.backend.attn, **attn_kwargs
        )
        x = self.attn_func(q, k, v, **_attn_kwargs)
        x = postprocess_output_for_attn(x, self.backend.attn)
        return self.o_proj(x.flatten(2))


# --- nemo_automodel/components/moe/layers.py (dense MLP) ----------------------
class MLP(nn.Module):
    def __init__(self, dim, inter_dim, backend, dtype=torch.bfloat16):
        super().__init__()
        self.gate_proj = initialize_linear_module(backend, dim, inter_dim, dtype=dtype)
        self.up_proj = initialize_linear_module(backend, dim, inter_dim, dtype=dtype)
        self.down_proj = initialize_linear_module(backend, inter_dim, dim, dtype=dtype)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


# --- nemo_automodel/components/models/deepseek_v3/model.py --------------------
class Block(nn.Module):
    def __init__(self, layer_idx, config, backend: BackendConfig):
        super().__init__()
        self.self_attn = MLA(config, backend)
        self.mlp = MLP(config.hidden_size, config.intermediate_size, backend.linear)
        self.input_layernorm = initialize_rms_norm_module(backend.rms_norm, config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = initialize_rms_norm_module(
            backend.rms_norm, config.hidden_size, eps=config.rms_norm_eps
        )
        self.layer_idx = layer_idx

    def forward(self, x, freqs_cis, attention_mask=None, padding_mask=None, **attn_kwargs):
        attn_out = self.self_attn(x=self.input_layernorm(x), freqs_cis=freqs_cis, attention_mask=attention_mask,
                                  **attn_kwargs)
        x = x + attn_out
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x


class DeepseekV3Model(nn.Module):
    def __init__(self, config, backend: BackendConfig):
        super().__init__()
        self.backend = backend
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, dtype=torch.bfloat16)
        self.layers = torch.nn.ModuleDict()
        for layer_id in range(config.num_hidden_layers):
            self.layers[str(layer_id)] = Block(layer_id, config, backend)
        self.norm = initialize_rms_norm_module(backend.rms_norm, config.hidden_size, eps=config.rms_norm_eps)
        self.register_buffer(
            "freqs_cis",
            precompute_freqs_cis(config.qk_rope_head_dim, config.max_position_embeddings, config.rope_theta, None),
            persistent=False,
        )

    def forward(self, input_ids, *, position_ids=None, attention_mask=None, padding_mask=None, **attn_kwargs):
        inputs_embeds = self.embed_tokens(input_ids)
        if position_ids is None:
            seq_len = inputs_embeds.shape[1]
            position_ids = torch.arange(seq_len).unsqueeze(0).expand(inputs_embeds.shape[0], -1)
        with torch.no_grad():
            freqs_cis = freqs_cis_from_position_ids(position_ids, self.freqs_cis, for_fused_rope=self.backend.rope_fusion)
        h = inputs_embeds
        for layer in self.layers.values():
            h = layer(x=h, freqs_cis=freqs_cis, attention_mask=attention_mask, padding_mask=padding_mask, **attn_kwargs)
        return self.norm(h) if self.norm else h


class DeepseekV3ForCausalLM(nn.Module):
    def __init__(self, config, backend: BackendConfig):
        super().__init__()
        self.model = DeepseekV3Model(config, backend)
        self.lm_head = initialize_linear_module(backend.linear, config.hidden_size, config.vocab_size)

    def forward(self, input_ids, **kwargs):
        return self.lm_head(self.model(input_ids, **kwargs))


class DeepseekV3Config:  # tiny stand-in for transformers' DeepseekV3Config
    vocab_size = 64
    hidden_size = 32
    intermediate_size = 48
    num_hidden_layers = 2
    num_attention_heads = 2
    q_lora_rank = 24
    kv_lora_rank = 16
    qk_nope_head_dim = 8
    qk_rope_head_dim = 4
    v_head_dim = 8
    rms_norm_eps = 1e-6
    max_position_embeddings = 64
    rope_theta = 10000.0


def squad_batches(num_batches, batch_size=2):
    """Padded causal-LM batches; each batch is padded to its own longest example."""
    g = torch.Generator().manual_seed(1)
    for _ in range(num_batches):
        lengths = torch.randint(6, 20, (batch_size,), generator=g)
        seq_len = int(lengths.max())
        input_ids = torch.randint(1, 64, (batch_size, seq_len), generator=g)
        labels = input_ids.clone()
        for i, n in enumerate(lengths.tolist()):
            input_ids[i, n:] = 0
            labels[i, n:] = -100
        yield input_ids, labels


torch.manual_seed(0)
model = DeepseekV3ForCausalLM(DeepseekV3Config(), BackendConfig(rms_norm="torch_fp32"))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

total = 0.0
for input_ids, labels in squad_batches(4):
    logits = model(input_ids)
    loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1),
                           ignore_index=-100)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    total += loss.item()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {total:.4f}")
