# bghira/SimpleTuner AFTER a97ac5725 ("h3: avoid recompiling by sparse attn index incrementing when disabled",
# PR #3081): MiniMaxH3AttnProcessor.__call__ reads `_h3_sparse_layer_index` only once sparse attention is known
# to be enabled, so with sparse attention disabled no block guards on its layer number and the regionally
# compiled blocks share one graph. Everything else is before.py unchanged.
import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


MINIMAX_H3_MODALITY_NUM = 3


# ---- diffusers / simpletuner helper stand-ins -------------------------------------------------------------------
def context_parallel_config(parallel_config):
    return getattr(parallel_config, "context_parallel_config", None)


def activation_offload_context(enabled: bool = True, *, label: str | None = None, prefetch: bool | None = None):
    """Offload non-leaf CUDA tensors saved for backward inside the context."""
    if not enabled:
        return nullcontext()
    raise NotImplementedError("activation offload is not part of this reproduction")


def dispatch_attention_fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, backend=None, parallel_config=None):
    # diffusers' native backend: (B, S, H, D) in and out
    out = torch.nn.functional.scaled_dot_product_attention(
        query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
        attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
    )
    return out.transpose(1, 2)


class AttentionModuleMixin:
    fused_projections = False

    def set_processor(self, processor) -> None:
        self.processor = processor


class SwiGLU(nn.Module):
    def __init__(self, dim_in: int, dim_out: int, bias: bool = True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out * 2, bias=bias)
        self.activation = nn.SiLU()

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        hidden_states, gate = hidden_states.chunk(2, dim=-1)
        return hidden_states * self.activation(gate)


class FeedForward(nn.Module):
    def __init__(self, dim, inner_dim, activation_fn="swiglu", bias=False):
        super().__init__()
        self.net = nn.ModuleList([SwiGLU(dim, inner_dim, bias=bias), nn.Dropout(0.0), nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class Timesteps(nn.Module):
    def __init__(self, num_channels: int, flip_sin_to_cos: bool, downscale_freq_shift: float):
        super().__init__()
        self.num_channels = num_channels

    def forward(self, timesteps):
        half_dim = self.num_channels // 2
        exponent = -math.log(10000) * torch.arange(half_dim, dtype=torch.float32, device=timesteps.device) / half_dim
        emb = timesteps[:, None].float() * torch.exp(exponent)[None, :]
        return torch.cat([torch.cos(emb), torch.sin(emb)], dim=-1)  # flip_sin_to_cos


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels: int, time_embed_dim: int, out_dim: int):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, out_dim)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


# ---- simpletuner/helpers/models/minimaxh3/sparse_attention.py -----------------------------------------------------
H3_SPARSE_ATTENTION_MODES = ("disabled", "moba3d")


def parse_h3_sparse_block_shape(value) -> tuple[int, int, int]:
    if isinstance(value, str):
        parts = [part.strip() for part in value.replace("x", ",").split(",") if part.strip()]
        shape = tuple(int(part) for part in parts)
    else:
        shape = tuple(int(part) for part in value)
    if len(shape) != 3 or min(shape, default=0) <= 0:
        raise ValueError(f"MiniMax-H3 sparse block shape must contain three positive integers, got {value!r}.")
    if math.prod(shape) != 128:
        raise ValueError("MiniMax-H3 FlexAttention sparse blocks currently require exactly 128 video tokens.")
    return shape


@dataclass(frozen=True)
class MiniMaxH3SparseAttentionConfig:
    mode: str = "disabled"
    block_shape: tuple[int, int, int] = (1, 8, 16)
    video_kv_fraction: float = 0.5
    share_across_heads: bool = False
    start_layer: int = 0

    def __post_init__(self) -> None:
        mode = str(self.mode or "disabled").strip().lower().replace("-", "_")
        aliases = {"none": "disabled", "full": "disabled", "dense": "disabled", "moba": "moba3d"}
        mode = aliases.get(mode, mode)
        if mode not in H3_SPARSE_ATTENTION_MODES:
            raise ValueError(f"MiniMax-H3 sparse attention mode must be one of {', '.join(H3_SPARSE_ATTENTION_MODES)}.")
        fraction = float(self.video_kv_fraction)
        if not math.isfinite(fraction) or not 0.0 < fraction <= 1.0:
            raise ValueError("MiniMax-H3 sparse video KV fraction must be finite and in (0, 1].")
        start_layer = int(self.start_layer)
        if start_layer < 0:
            raise ValueError("MiniMax-H3 sparse start layer must be non-negative.")
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "block_shape", parse_h3_sparse_block_shape(self.block_shape))
        object.__setattr__(self, "video_kv_fraction", fraction)
        object.__setattr__(self, "share_across_heads", bool(self.share_across_heads))
        object.__setattr__(self, "start_layer", start_layer)

    @property
    def enabled(self) -> bool:
        return self.mode != "disabled"


def minimax_h3_sparse_attention(query, key, value, *, layout, config):
    raise NotImplementedError("sparse attention is disabled in this reproduction (the default)")


# ---- simpletuner/helpers/models/minimaxh3/transformer.py ---------------------------------------------------------
def _apply_rotary_emb(hidden_states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    rotary_dim = cos.shape[-1]
    hidden_states_rotary = hidden_states[..., :rotary_dim]
    hidden_states_pass = hidden_states[..., rotary_dim:]

    cos = cos.to(hidden_states.dtype)
    sin = sin.to(hidden_states.dtype)
    if cos.ndim == 2:
        cos = cos[None, :, None, :]
        sin = sin[None, :, None, :]
    elif cos.ndim == 3:
        cos = cos[:, :, None, :]
        sin = sin[:, :, None, :]
    else:
        raise ValueError(f"MiniMax-H3 rotary embeddings must be 2-D or 3-D, got {list(cos.shape)}.")
    x1, x2 = hidden_states_rotary.chunk(2, dim=-1)
    hidden_states_rotated = torch.cat((-x2, x1), dim=-1)
    hidden_states_rotary = hidden_states_rotary * cos + hidden_states_rotated * sin
    return torch.cat((hidden_states_rotary, hidden_states_pass), dim=-1).contiguous()


def _select_modulation(table: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    if indices.ndim == 1:
        return table.index_select(0, indices)
    if indices.ndim != 2:
        raise ValueError(f"MiniMax-H3 modulation indices must be 1-D or 2-D, got {list(indices.shape)}.")
    return table.index_select(0, indices.reshape(-1)).view(*indices.shape, table.shape[-1])


class MiniMaxH3RotaryPosEmbed(nn.Module):
    def __init__(self, rope_freq_dim: int = 16, rope_theta: float = 10000.0):
        super().__init__()
        self.rope_freq_dim = rope_freq_dim
        inv_freq = 1.0 / (rope_theta ** (torch.arange(0, 2 * rope_freq_dim, 2, dtype=torch.float32) / (2 * rope_freq_dim)))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        position_ids = position_ids.to(torch.float32)
        inv_freq = self.inv_freq.to(device=position_ids.device)
        freqs = position_ids.unsqueeze(-1) * inv_freq.view(1, 1, -1)
        freqs_t, freqs_h, freqs_w = freqs.unbind(dim=-2)
        freqs = torch.cat((freqs_t, freqs_h, freqs_w), dim=-1)
        freqs = torch.cat((freqs, freqs), dim=-1)
        return freqs.cos(), freqs.sin()


class MiniMaxH3AdaLayerNormModulation(nn.Module):
    def __init__(self, time_embed_dim: int, hidden_size: int, apply_silu: bool = True):
        super().__init__()
        self.hidden_size = hidden_size
        self.apply_silu = apply_silu
        self.linear = nn.Linear(time_embed_dim, 6 * hidden_size * MINIMAX_H3_MODALITY_NUM, bias=True)

    def forward(self, temb: torch.Tensor) -> tuple[torch.Tensor, ...]:
        temb = nn.functional.silu(temb) if self.apply_silu else temb
        temb = self.linear(temb.to(self.linear.weight.dtype))
        temb = temb.view(-1, 6 * self.hidden_size)
        return temb.chunk(6, dim=-1)


class MiniMaxH3AdaLayerNormOut(nn.Module):
    def __init__(self, hidden_size: int, time_embed_dim: int, eps: float, apply_silu: bool = True):
        super().__init__()
        self.apply_silu = apply_silu
        self.norm = nn.RMSNorm(hidden_size, eps=eps)
        self.linear = nn.Linear(time_embed_dim, 2 * hidden_size, bias=True)

    def forward(self, hidden_states, temb, timestep_indices):
        temb = nn.functional.silu(temb) if self.apply_silu else temb
        shift, scale = self.linear(temb.to(self.linear.weight.dtype)).chunk(2, dim=-1)
        activation_dtype = hidden_states.dtype
        hidden_states = self.norm(hidden_states)
        shift = _select_modulation(shift, timestep_indices).to(dtype=activation_dtype)
        scale = _select_modulation(scale, timestep_indices).to(dtype=activation_dtype)
        return hidden_states * (1.0 + scale) + shift


class MiniMaxH3AttnProcessor:
    r"""
    Full self-attention over one packed sequence. There is no cross-attention anywhere in MiniMax-H3.
    """

    _attention_backend = None
    _parallel_config = None

    def __call__(
        self,
        attn: "MiniMaxH3Attention",
        hidden_states: torch.Tensor,
        rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        reference_mask: torch.Tensor | None = None,
        reference_kv_cache: dict[Any, tuple[torch.Tensor, torch.Tensor]] | None = None,
        reference_kv_stats: dict[str, int] | None = None,
        sparse_attention_layout=None,
    ) -> torch.Tensor:
        use_reference_cache = (
            reference_mask is not None
            and reference_kv_cache is not None
            and not attn.fused_projections
            and not torch.is_grad_enabled()
            and bool(reference_mask.any())
        )
        if use_reference_cache:
            raise NotImplementedError("the CachedKV reference path (inference only) is not part of this reproduction")
        elif attn.fused_projections:
            query, key, value = attn.to_qkv(hidden_states).chunk(3, dim=-1)
            query = query.unflatten(-1, (attn.heads, -1))
            key = key.unflatten(-1, (attn.heads, -1))
            value = value.unflatten(-1, (attn.heads, -1))

            query = attn.norm_q(query)
            key = attn.norm_k(key)

            if rotary_emb is not None:
                query = _apply_rotary_emb(query, *rotary_emb)
                key = _apply_rotary_emb(key, *rotary_emb)
        else:
            query = attn.to_q(hidden_states)
            key = attn.to_k(hidden_states)
            value = attn.to_v(hidden_states)

            query = query.unflatten(-1, (attn.heads, -1))
            key = key.unflatten(-1, (attn.heads, -1))
            value = value.unflatten(-1, (attn.heads, -1))

            query = attn.norm_q(query)
            key = attn.norm_k(key)

            if rotary_emb is not None:
                query = _apply_rotary_emb(query, *rotary_emb)
                key = _apply_rotary_emb(key, *rotary_emb)

        if attention_mask is not None and context_parallel_config(self._parallel_config) is not None:
            raise NotImplementedError("context parallelism is not part of this reproduction")
        sparse_config = getattr(attn, "_h3_sparse_attention_config", None)
        use_sparse_attention = sparse_attention_layout is not None and sparse_config is not None and sparse_config.enabled
        if use_sparse_attention:
            sparse_layer_index = int(getattr(attn, "_h3_sparse_layer_index", -1))
            use_sparse_attention = sparse_layer_index >= sparse_config.start_layer
        if use_sparse_attention:
            cp_config = context_parallel_config(self._parallel_config)
            if attention_mask is not None and cp_config is None and sparse_attention_layout.packed_valid_mask is None:
                raise ValueError("MiniMax-H3 sparse attention cannot be combined with a packed attention mask yet.")
            if reference_mask is not None and attention_mask is not None:
                raise ValueError("MiniMax-H3 sparse attention cannot combine batched padding with CachedKV masking yet.")
            hidden_states = minimax_h3_sparse_attention(
                query,
                key,
                value,
                layout=sparse_attention_layout,
                config=sparse_config,
            )
        else:
            hidden_states = dispatch_attention_fn(
                query,
                key,
                value,
                attn_mask=attention_mask,
                dropout_p=0.0,
                is_causal=False,
                backend=self._attention_backend,
                parallel_config=self._parallel_config,
            )
        hidden_states = hidden_states.flatten(2, 3).type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class MiniMaxH3Attention(nn.Module, AttentionModuleMixin):
    _default_processor_cls = MiniMaxH3AttnProcessor
    _available_processors = [MiniMaxH3AttnProcessor]

    def __init__(self, hidden_size: int, heads: int, dim_head: int, qk_norm_eps: float = 1e-5, processor=None):
        super().__init__()
        self.heads = heads
        self.head_dim = dim_head
        self.inner_dim = heads * dim_head
        self.use_bias = False

        self.to_q = nn.Linear(hidden_size, self.inner_dim, bias=False)
        self.to_k = nn.Linear(hidden_size, self.inner_dim, bias=False)
        self.to_v = nn.Linear(hidden_size, self.inner_dim, bias=False)
        self.norm_q = nn.RMSNorm(dim_head, eps=qk_norm_eps)
        self.norm_k = nn.RMSNorm(dim_head, eps=qk_norm_eps)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, hidden_size, bias=False), nn.Dropout(0.0)])

        if processor is None:
            processor = self._default_processor_cls()
        self.set_processor(processor)

    def forward(
        self,
        hidden_states,
        rotary_emb=None,
        attention_mask=None,
        reference_mask=None,
        reference_kv_cache=None,
        reference_kv_stats=None,
        sparse_attention_layout=None,
    ) -> torch.Tensor:
        return self.processor(
            self,
            hidden_states,
            rotary_emb,
            attention_mask,
            reference_mask=reference_mask,
            reference_kv_cache=reference_kv_cache,
            reference_kv_stats=reference_kv_stats,
            sparse_attention_layout=sparse_attention_layout,
        )


class MiniMaxH3TransformerBlock(nn.Module):
    def __init__(
        self,
        hidden_size: int,
        num_attention_heads: int,
        attention_head_dim: int,
        ffn_dim: int,
        time_embed_dim: int,
        norm_eps: float,
        qk_norm_eps: float,
        adaln_apply_silu: bool = True,
    ):
        super().__init__()
        self.norm1 = nn.RMSNorm(hidden_size, eps=norm_eps)
        self.attn = MiniMaxH3Attention(
            hidden_size=hidden_size,
            heads=num_attention_heads,
            dim_head=attention_head_dim,
            qk_norm_eps=qk_norm_eps,
        )
        self.norm2 = nn.RMSNorm(hidden_size, eps=norm_eps)
        self.ff = FeedForward(hidden_size, inner_dim=ffn_dim, activation_fn="swiglu", bias=False)
        self.adaln_proj = MiniMaxH3AdaLayerNormModulation(
            time_embed_dim=time_embed_dim,
            hidden_size=hidden_size,
            apply_silu=adaln_apply_silu,
        )

    def forward(
        self,
        hidden_states: torch.Tensor,
        temb: torch.Tensor,
        adaln_indices: torch.Tensor,
        rotary_emb: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None = None,
        checkpoint_ffn: bool = False,
        checkpoint_fn: Any | None = None,
        offload_attention: bool = False,
        reference_mask: torch.Tensor | None = None,
        reference_kv_cache=None,
        reference_kv_stats=None,
        sparse_attention_layout=None,
    ) -> torch.Tensor:
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaln_proj(temb)
        activation_dtype = hidden_states.dtype
        shift_msa = _select_modulation(shift_msa, adaln_indices).to(dtype=activation_dtype)
        scale_msa = _select_modulation(scale_msa, adaln_indices).to(dtype=activation_dtype)
        gate_msa = _select_modulation(gate_msa, adaln_indices).to(dtype=activation_dtype)
        shift_mlp = _select_modulation(shift_mlp, adaln_indices).to(dtype=activation_dtype)
        scale_mlp = _select_modulation(scale_mlp, adaln_indices).to(dtype=activation_dtype)
        gate_mlp = _select_modulation(gate_mlp, adaln_indices).to(dtype=activation_dtype)

        residual = hidden_states
        norm_hidden_states = self.norm1(hidden_states)
        norm_hidden_states = norm_hidden_states * (1.0 + scale_msa) + shift_msa
        with activation_offload_context(offload_attention, label=f"{self.__class__.__qualname__}:attention"):
            attn_output = self.attn(
                norm_hidden_states,
                rotary_emb,
                attention_mask,
                reference_mask=reference_mask,
                reference_kv_cache=reference_kv_cache,
                reference_kv_stats=reference_kv_stats,
                sparse_attention_layout=sparse_attention_layout,
            )
        hidden_states = residual + gate_msa * attn_output

        residual = hidden_states
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1.0 + scale_mlp) + shift_mlp
        if checkpoint_ffn:
            if checkpoint_fn is None:
                raise ValueError("checkpoint_fn is required when checkpoint_ffn=True")
            ff_output = checkpoint_fn(self.ff, norm_hidden_states, use_reentrant=False)
        else:
            ff_output = self.ff(norm_hidden_states)
        hidden_states = residual + gate_mlp * ff_output
        return hidden_states


class MiniMaxH3Transformer3DModel(nn.Module):
    _repeated_blocks = ["MiniMaxH3TransformerBlock", "MiniMaxH3TokenRefinerBlock"]

    def __init__(
        self,
        num_attention_heads: int = 2,
        attention_head_dim: int = 16,
        hidden_size: int = 32,
        num_layers: int = 6,
        ffn_dim: int = 64,
        in_channels: int = 2,
        patch_size: tuple[int, int, int] = (1, 2, 2),
        freq_dim: int = 16,
        time_embed_hidden_dim: int = 32,
        time_embed_dim: int = 16,
        rope_freq_dim: int = 2,
        rope_theta: float = 10000.0,
        norm_eps: float = 1e-5,
        qk_norm_eps: float = 1e-5,
        final_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        video_patch_dim = in_channels * patch_size[0] * patch_size[1] * patch_size[2]
        self.proj_in = nn.Linear(video_patch_dim, hidden_size, bias=True)
        self.time_proj = Timesteps(num_channels=freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=freq_dim, time_embed_dim=time_embed_hidden_dim, out_dim=time_embed_dim)
        self.rope = MiniMaxH3RotaryPosEmbed(rope_freq_dim=rope_freq_dim, rope_theta=rope_theta)

        # 5. The block stack
        self.transformer_blocks = nn.ModuleList(
            [
                MiniMaxH3TransformerBlock(
                    hidden_size=hidden_size,
                    num_attention_heads=num_attention_heads,
                    attention_head_dim=attention_head_dim,
                    ffn_dim=ffn_dim,
                    time_embed_dim=time_embed_dim,
                    norm_eps=norm_eps,
                    qk_norm_eps=qk_norm_eps,
                )
                for _ in range(num_layers)
            ]
        )
        self._h3_sparse_attention_config = MiniMaxH3SparseAttentionConfig()
        for layer_index, block in enumerate(self.transformer_blocks):
            block.attn._h3_sparse_layer_index = layer_index
            block.attn._h3_sparse_attention_config = self._h3_sparse_attention_config

        self.norm_out = MiniMaxH3AdaLayerNormOut(hidden_size=hidden_size, time_embed_dim=time_embed_dim, eps=final_norm_eps)
        self.proj_out = nn.Linear(hidden_size, video_patch_dim, bias=True)

    def forward(self, hidden_states, timestep, timestep_indices, token_tags, position_ids, attention_mask=None):
        # (the real forward also packs text/audio/condition rows, TREAD routing, CP, checkpointing, ...)
        hidden_states = self.proj_in(hidden_states)
        temb = self.time_embedder(self.time_proj(timestep))
        adaln_indices = timestep_indices * MINIMAX_H3_MODALITY_NUM + token_tags
        rotary_emb = self.rope(position_ids)

        sparse_config = self._h3_sparse_attention_config
        sparse_attention_layout = None
        if sparse_config.enabled:
            raise NotImplementedError("sparse attention is disabled in this reproduction (the default)")
        block_sparse_attention_layout = sparse_attention_layout

        for block_idx, block in enumerate(self.transformer_blocks):
            hidden_states = block(
                hidden_states,
                temb,
                adaln_indices,
                rotary_emb,
                attention_mask,
                sparse_attention_layout=block_sparse_attention_layout,
            )

        hidden_states = self.norm_out(hidden_states, temb, timestep_indices)
        return self.proj_out(hidden_states)


# ---- accelerate/utils/other.py: regional compilation (TorchDynamoPlugin(use_regional_compilation=True)) ------
def is_repeated_blocks(module: torch.nn.Module) -> bool:
    return (
        isinstance(module, torch.nn.ModuleList)
        and len(module) > 0
        and all(isinstance(m, module[0].__class__) for m in module)
    )


def has_repeated_blocks(module: torch.nn.Module) -> bool:
    if module._modules:
        for submodule in module.modules():
            if is_repeated_blocks(submodule):
                return True
    return False


def compile_regions(module: torch.nn.Module, **compile_kwargs) -> torch.nn.Module:
    def _compile_regions(module: torch.nn.Module, **compile_kwargs) -> torch.nn.Module:
        if is_repeated_blocks(module):
            new_module = torch.nn.ModuleList()
            for submodule in module:
                new_module.append(torch.compile(submodule, **compile_kwargs))
        elif has_repeated_blocks(module):
            new_module = module.__class__.__new__(module.__class__)
            new_module.__dict__.update(module.__dict__)
            new_module._modules = {}
            for name, submodule in module.named_children():
                new_module.add_module(name, _compile_regions(submodule, **compile_kwargs))
        else:
            new_module = torch.compile(module, **compile_kwargs)

        return new_module

    new_module = _compile_regions(module, **compile_kwargs)

    if "_orig_mod" not in new_module.__dict__:
        new_module.__dict__["_orig_mod"] = module

    return new_module


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = MiniMaxH3Transformer3DModel()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # accelerator.prepare(model) with SimpleTuner's TorchDynamoPlugin(backend=..., use_regional_compilation=True)
    model = compile_regions(model, backend=counting_backend)
    model.train()

    seq, patch_dim = 12, 8
    out = 0.0
    for step in range(3):
        latents = torch.randn(1, seq, patch_dim)
        noise = torch.randn(1, seq, patch_dim)
        timestep = torch.rand(1) * 1000
        timestep_indices = torch.zeros(seq, dtype=torch.long)
        token_tags = torch.arange(seq) % MINIMAX_H3_MODALITY_NUM
        position_ids = torch.stack(
            [torch.zeros(seq), torch.arange(seq) // 4, torch.arange(seq) % 4], dim=-1
        ).long()
        model_pred = model(latents + noise, timestep, timestep_indices, token_tags, position_ids)
        loss = torch.nn.functional.mse_loss(model_pred.float(), (noise - latents).float())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        out += loss.item()

    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {out:.4f}")
