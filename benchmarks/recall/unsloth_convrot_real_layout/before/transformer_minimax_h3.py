# diffusers stand-ins and transformer_minimax_h3.py (trimmed)
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Iterable, Optional, Tuple
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ============================ diffusers stand-ins (ModelMixin, FeedForward, embeddings) ============================
class ModelMixin(nn.Module):  # diffusers.models.modeling_utils.ModelMixin.compile_repeated_blocks
    _repeated_blocks = []

    def compile_repeated_blocks(self, *args, **kwargs):
        repeated_blocks = getattr(self, "_repeated_blocks", None)
        if not repeated_blocks:
            raise ValueError("`_repeated_blocks` attribute is empty. ")
        has_compiled_region = False
        for submod in self.modules():
            if submod.__class__.__name__ in repeated_blocks:
                submod.compile(*args, **kwargs)
                has_compiled_region = True
        if not has_compiled_region:
            raise ValueError(f"Regional compilation failed because {repeated_blocks} classes are not found in the model. ")


class SwiGLU(nn.Module):
    def __init__(self, dim_in: int, dim_out: int, bias: bool = True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out * 2, bias=bias)
        self.activation = nn.SiLU()

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        hidden_states, gate = hidden_states.chunk(2, dim=-1)
        return hidden_states * self.activation(gate)


class FeedForward(nn.Module):  # diffusers attention.FeedForward, activation_fn="swiglu", dropout 0
    def __init__(self, dim, dim_out=None, inner_dim=None, activation_fn="swiglu", bias=True):
        super().__init__()
        dim_out = dim_out or dim
        self.net = nn.ModuleList([SwiGLU(dim, inner_dim, bias=bias), nn.Dropout(0.0), nn.Linear(inner_dim, dim_out, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


def get_timestep_embedding(timesteps, embedding_dim, flip_sin_to_cos=False, downscale_freq_shift=1, scale=1,
                           max_period=10000):
    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(start=0, end=half_dim, dtype=torch.float32, device=timesteps.device)
    exponent = exponent / (half_dim - downscale_freq_shift)
    emb = torch.exp(exponent)
    emb = timesteps[:, None].float() * emb[None, :]
    emb = scale * emb
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, half_dim:], emb[:, :half_dim]], dim=-1)
    return emb


class Timesteps(nn.Module):
    def __init__(self, num_channels: int, flip_sin_to_cos: bool, downscale_freq_shift: float, scale: int = 1):
        super().__init__()
        self.num_channels = num_channels
        self.flip_sin_to_cos = flip_sin_to_cos
        self.downscale_freq_shift = downscale_freq_shift
        self.scale = scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels: int, time_embed_dim: int, out_dim: int = None):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, out_dim or time_embed_dim)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


def attention(query, key, value, causal=False):  # attention_utils.attention, SDPA path; (B, S, H, D)
    out = F.scaled_dot_product_attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                                         is_causal=causal)
    return out.transpose(1, 2)


# ============================ transformer_minimax_h3.py (trimmed) ============================
MINIMAX_H3_MODALITY_NUM = 3


def apply_minimax_h3_rotary_emb(hidden_states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    rotary_dim = cos.shape[-1]
    hidden_states_rotary = hidden_states[..., :rotary_dim]
    hidden_states_pass = hidden_states[..., rotary_dim:]

    cos = cos.to(hidden_states.dtype)[None, :, None, :]
    sin = sin.to(hidden_states.dtype)[None, :, None, :]
    x1, x2 = hidden_states_rotary.chunk(2, dim=-1)
    hidden_states_rotated = torch.cat((-x2, x1), dim=-1)
    hidden_states_rotary = hidden_states_rotary * cos + hidden_states_rotated * sin
    return torch.cat((hidden_states_rotary, hidden_states_pass), dim=-1).contiguous()


class MiniMaxH3RotaryPosEmbed(nn.Module):
    def __init__(self, rope_freq_dim: int = 16, rope_theta: float = 10000.0):
        super().__init__()
        self.rope_freq_dim = rope_freq_dim
        self.rope_theta = rope_theta
        self.register_buffer("inv_freq", self._compute_inv_freq(), persistent=False)

    def _compute_inv_freq(self, device: Optional[torch.device] = None) -> torch.Tensor:
        return 1.0 / (
            self.rope_theta
            ** (
                torch.arange(0, 2 * self.rope_freq_dim, 2, dtype=torch.float32, device=device)
                / (2 * self.rope_freq_dim)
            )
        )

    def forward(self, position_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        position_ids = position_ids.to(torch.float32)
        freqs = position_ids.unsqueeze(-1) * self.inv_freq.view(1, 1, -1)
        freqs_t, freqs_h, freqs_w = freqs.unbind(dim=1)
        freqs = torch.cat((freqs_t, freqs_h, freqs_w), dim=-1)
        freqs = torch.cat((freqs, freqs), dim=-1)
        return freqs.cos(), freqs.sin()


class MiniMaxH3AdaLayerNormModulation(nn.Module):
    def __init__(self, time_embed_dim: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.linear = nn.Linear(time_embed_dim, 6 * hidden_size * MINIMAX_H3_MODALITY_NUM, bias=True)

    def forward(self, temb: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        temb = self.linear(F.silu(temb).to(self.linear.weight.dtype))
        temb = temb.view(-1, 6 * self.hidden_size)
        return temb.chunk(6, dim=-1)


def _index_select_rows(table: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    if table.dtype != torch.bfloat16:
        return table.index_select(0, indices)
    return table.float().index_select(0, indices).to(table.dtype)


class MiniMaxH3AdaLayerNormOut(nn.Module):
    def __init__(self, hidden_size: int, time_embed_dim: int, eps: float):
        super().__init__()
        self.norm = nn.RMSNorm(hidden_size, eps=eps)
        self.linear = nn.Linear(time_embed_dim, 2 * hidden_size, bias=True)

    def forward(self, hidden_states: torch.Tensor, temb: torch.Tensor, timestep_indices: torch.Tensor) -> torch.Tensor:
        shift, scale = self.linear(F.silu(temb).to(self.linear.weight.dtype)).chunk(2, dim=-1)
        hidden_states = self.norm(hidden_states)
        return hidden_states * (1.0 + _index_select_rows(scale, timestep_indices)) + _index_select_rows(
            shift, timestep_indices
        )


class MiniMaxH3AttnProcessor:
    def __call__(self, attn, hidden_states, rotary_emb=None, attention_mask=None, valid_length=None):
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)

        query = query.unflatten(-1, (attn.heads, -1))
        key = key.unflatten(-1, (attn.heads, -1))
        value = value.unflatten(-1, (attn.heads, -1))

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        if rotary_emb is not None:
            query = apply_minimax_h3_rotary_emb(query, *rotary_emb)
            key = apply_minimax_h3_rotary_emb(key, *rotary_emb)

        if attention_mask is None:
            hidden_states = attention(query, key, value, causal=False)
        else:
            hidden_states = F.scaled_dot_product_attention(
                query.transpose(1, 2),
                key.transpose(1, 2),
                value.transpose(1, 2),
                attn_mask=attention_mask[None, None],
            ).transpose(1, 2)

        hidden_states = hidden_states.flatten(2, 3).type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class MiniMaxH3Attention(nn.Module):
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

        self.set_processor(MiniMaxH3AttnProcessor() if processor is None else processor)

    def set_processor(self, processor) -> None:
        self.processor = processor

    def forward(self, hidden_states, rotary_emb=None, attention_mask=None, valid_length=None):
        return self.processor(self, hidden_states, rotary_emb, attention_mask, valid_length)


class MiniMaxH3TokenRefinerBlock(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, attention_head_dim, ffn_dim, norm_eps, qk_norm_eps):
        super().__init__()
        self.norm1 = nn.RMSNorm(hidden_size, eps=norm_eps)
        self.attn = MiniMaxH3Attention(hidden_size=hidden_size, heads=num_attention_heads,
                                       dim_head=attention_head_dim, qk_norm_eps=qk_norm_eps)
        self.norm2 = nn.RMSNorm(hidden_size, eps=norm_eps)
        self.ff = FeedForward(hidden_size, inner_dim=ffn_dim, activation_fn="swiglu", bias=False)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = hidden_states + self.attn(self.norm1(hidden_states))
        hidden_states = hidden_states + self.ff(self.norm2(hidden_states))
        return hidden_states


class MiniMaxH3TokenRefiner(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, attention_head_dim, ffn_dim, num_layers, norm_eps,
                 qk_norm_eps, final_norm_eps):
        super().__init__()
        self.refiner_blocks = nn.ModuleList(
            [
                MiniMaxH3TokenRefinerBlock(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                                           attention_head_dim=attention_head_dim, ffn_dim=ffn_dim,
                                           norm_eps=norm_eps, qk_norm_eps=qk_norm_eps)
                for _ in range(num_layers)
            ]
        )
        self.final_norm = nn.RMSNorm(hidden_size, eps=final_norm_eps)
        self.gradient_checkpointing = False

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        for block in self.refiner_blocks:
            if torch.is_grad_enabled() and self.gradient_checkpointing:
                hidden_states = torch.utils.checkpoint.checkpoint(block, hidden_states, use_reentrant=False)
            else:
                hidden_states = block(hidden_states)
        return self.final_norm(hidden_states)


class MiniMaxH3TransformerBlock(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, attention_head_dim, ffn_dim, time_embed_dim, norm_eps,
                 qk_norm_eps):
        super().__init__()
        self.norm1 = nn.RMSNorm(hidden_size, eps=norm_eps)
        self.attn = MiniMaxH3Attention(hidden_size=hidden_size, heads=num_attention_heads,
                                       dim_head=attention_head_dim, qk_norm_eps=qk_norm_eps)
        self.norm2 = nn.RMSNorm(hidden_size, eps=norm_eps)
        self.ff = FeedForward(hidden_size, inner_dim=ffn_dim, activation_fn="swiglu", bias=False)
        self.adaln_proj = MiniMaxH3AdaLayerNormModulation(time_embed_dim=time_embed_dim, hidden_size=hidden_size)

    def forward(self, hidden_states, temb, adaln_indices, rotary_emb, attention_mask=None, valid_length=None):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaln_proj(temb)

        residual = hidden_states
        norm_hidden_states = self.norm1(hidden_states)
        norm_hidden_states = norm_hidden_states * (
            1.0 + _index_select_rows(scale_msa, adaln_indices)
        ) + _index_select_rows(shift_msa, adaln_indices)
        attn_output = self.attn(norm_hidden_states, rotary_emb, attention_mask, valid_length)
        hidden_states = residual + _index_select_rows(gate_msa, adaln_indices) * attn_output

        residual = hidden_states
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (
            1.0 + _index_select_rows(scale_mlp, adaln_indices)
        ) + _index_select_rows(shift_mlp, adaln_indices)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = residual + _index_select_rows(gate_mlp, adaln_indices) * ff_output

        return hidden_states


class MiniMaxH3Transformer3DModel(ModelMixin):
    _repeated_blocks = ["MiniMaxH3TransformerBlock", "MiniMaxH3TokenRefinerBlock"]

    def __init__(self, num_attention_heads=2, attention_head_dim=16, hidden_size=32, num_layers=4,
                 num_refiner_layers=2, ffn_dim=64, in_channels=4, audio_in_channels=4, patch_size=(1, 2, 2),
                 text_dim=24, freq_dim=16, time_embed_hidden_dim=32, time_embed_dim=16, rope_freq_dim=2,
                 rope_theta=10000.0, norm_eps=1e-5, qk_norm_eps=1e-5, final_norm_eps=1e-5):
        super().__init__()
        video_patch_dim = in_channels * patch_size[0] * patch_size[1] * patch_size[2]
        self.proj_in = nn.Linear(video_patch_dim, hidden_size, bias=True)
        self.audio_proj_in = nn.Linear(audio_in_channels, hidden_size, bias=True)
        self.context_embedder = nn.Linear(text_dim, hidden_size, bias=True)
        self.time_proj = Timesteps(num_channels=freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=freq_dim, time_embed_dim=time_embed_hidden_dim,
                                               out_dim=time_embed_dim)
        self.rope = MiniMaxH3RotaryPosEmbed(rope_freq_dim=rope_freq_dim, rope_theta=rope_theta)
        self.token_refiner = MiniMaxH3TokenRefiner(
            hidden_size=hidden_size, num_attention_heads=num_attention_heads,
            attention_head_dim=attention_head_dim, ffn_dim=ffn_dim, num_layers=num_refiner_layers,
            norm_eps=norm_eps, qk_norm_eps=qk_norm_eps, final_norm_eps=final_norm_eps,
        )
        self.transformer_blocks = nn.ModuleList(
            [
                MiniMaxH3TransformerBlock(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                                          attention_head_dim=attention_head_dim, ffn_dim=ffn_dim,
                                          time_embed_dim=time_embed_dim, norm_eps=norm_eps, qk_norm_eps=qk_norm_eps)
                for _ in range(num_layers)
            ]
        )
        self.norm_out = MiniMaxH3AdaLayerNormOut(hidden_size=hidden_size, time_embed_dim=time_embed_dim,
                                                 eps=final_norm_eps)
        self.proj_out = nn.Linear(hidden_size, video_patch_dim, bias=True)
        self.audio_proj_out = nn.Linear(hidden_size, audio_in_channels, bias=True)
        self.gradient_checkpointing = False
        self.gradient_checkpointing_save_on_cpu = False

    def forward(self, hidden_states, audio_hidden_states, encoder_hidden_states, timestep, timestep_indices,
                token_tags, position_ids, video_indices, audio_indices, text_indices):
        sequence_length = position_ids.shape[0]

        video_embeds = self.proj_in(hidden_states.to(self.proj_in.weight.dtype))
        audio_embeds = self.audio_proj_in(audio_hidden_states.to(self.audio_proj_in.weight.dtype))
        text_embeds = self.context_embedder(encoder_hidden_states.to(self.context_embedder.weight.dtype))
        text_embeds = self.token_refiner(text_embeds)

        hidden_states = text_embeds.new_zeros((text_embeds.shape[0], sequence_length, text_embeds.shape[-1]))
        hidden_states = hidden_states.index_copy(1, text_indices, text_embeds)
        hidden_states = hidden_states.index_copy(1, video_indices, video_embeds.to(text_embeds.dtype))
        hidden_states = hidden_states.index_copy(1, audio_indices, audio_embeds.to(text_embeds.dtype))

        temb = self.time_proj(timestep)
        temb = self.time_embedder(temb.to(self.time_embedder.linear_1.weight.dtype)).to(hidden_states.dtype)

        adaln_indices = timestep_indices * MINIMAX_H3_MODALITY_NUM + token_tags.clamp(min=0)

        attention_mask = None
        is_pad = token_tags < 0
        if bool(is_pad.any()):
            attention_mask = is_pad[None, :] == is_pad[:, None]
        valid_length = None

        rotary_emb = self.rope(position_ids)

        for block in self.transformer_blocks:
            with torch.autograd.graph.save_on_cpu() if self.gradient_checkpointing_save_on_cpu else nullcontext():
                hidden_states = block(hidden_states, temb, adaln_indices, rotary_emb, attention_mask, valid_length)

        hidden_states = self.norm_out(hidden_states, temb, timestep_indices).to(self.proj_out.weight.dtype)
        video_output = self.proj_out(hidden_states).index_select(1, video_indices)
        audio_output = self.audio_proj_out(hidden_states).index_select(1, audio_indices)
        return (video_output, audio_output)


