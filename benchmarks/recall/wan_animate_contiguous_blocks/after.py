# Reproduction of huggingface/diffusers WanAnimateTransformer3DModel AFTER dd680ee627
# ("Get regional compilation working without recompilation", PR #12526): the fix adds `.contiguous()`.
# Before it, `hidden_states.flatten(2).transpose(1, 2)` handed a non-contiguous tensor to the first
# WanTransformerBlock; `compile_repeated_blocks` compiled every block with `submod.compile()`, so all
# blocks share one code object (WanTransformerBlock.forward) and the second block, fed the
# contiguous output of the first, fails the stride guard.
# (src/diffusers/models/transformers/transformer_wan_animate.py at dd680ee627^; helpers from
# embeddings.py / normalization.py / attention.py / modeling_utils.py, trimmed.)
import math
from typing import Any, Dict, Optional, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- minimal stand-ins for diffusers infrastructure -------------------------------------------
USE_PEFT_BACKEND = False


class AttentionModuleMixin:  # diffusers.models.attention.AttentionModuleMixin (only what is used)
    fused_projections = False

    def set_processor(self, processor):
        self.processor = processor


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


class Config(dict):
    __getattr__ = dict.__getitem__


def dispatch_attention_fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, backend=None,
                          parallel_config=None):
    # native backend: (B, S, H, D) in and out
    query, key, value = (x.permute(0, 2, 1, 3) for x in (query, key, value))
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                         is_causal=is_causal)
    return out.permute(0, 2, 1, 3)


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        origin_dtype = inputs.dtype
        return F.layer_norm(
            inputs.float(),
            self.normalized_shape,
            self.weight.float() if self.weight is not None else None,
            self.bias.float() if self.bias is not None else None,
            self.eps,
        ).to(origin_dtype)


class FeedForward(nn.Module):  # attention.FeedForward with GELU(approximate="tanh"), dropout 0
    def __init__(self, dim, dim_out=None, mult=4, inner_dim=None, activation_fn="gelu-approximate"):
        super().__init__()
        inner_dim = inner_dim or int(dim * mult)
        dim_out = dim_out or dim
        approximate = "tanh" if activation_fn == "gelu-approximate" else "none"
        self.proj = nn.Linear(dim, inner_dim)
        self.act = nn.GELU(approximate=approximate)
        self.out = nn.Linear(inner_dim, dim_out)

    def forward(self, hidden_states):
        return self.out(self.act(self.proj(hidden_states)))


def get_timestep_embedding(timesteps, embedding_dim, flip_sin_to_cos=False, downscale_freq_shift=1, scale=1,
                           max_period=10000):
    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(start=0, end=half_dim, dtype=torch.float32,
                                                    device=timesteps.device)
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
    def __init__(self, in_channels: int, time_embed_dim: int):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size, act_fn="gelu_tanh"):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden_size)
        self.act_1 = nn.GELU(approximate="tanh")
        self.linear_2 = nn.Linear(hidden_size, hidden_size)

    def forward(self, caption):
        return self.linear_2(self.act_1(self.linear_1(caption)))


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, repeat_interleave_real=True,
                            freqs_dtype=torch.float32):
    pos = torch.arange(pos)
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device) / dim))
    freqs = torch.outer(pos, freqs)
    freqs_cos = freqs.cos().repeat_interleave(2, dim=1, output_size=freqs.shape[1] * 2).float()
    freqs_sin = freqs.sin().repeat_interleave(2, dim=1, output_size=freqs.shape[1] * 2).float()
    return freqs_cos, freqs_sin


# ---- transformer_wan_animate.py ----------------------------------------------------------------
def _get_qkv_projections(attn, hidden_states, encoder_hidden_states):
    if encoder_hidden_states is None:
        encoder_hidden_states = hidden_states
    query = attn.to_q(hidden_states)
    key = attn.to_k(encoder_hidden_states)
    value = attn.to_v(encoder_hidden_states)
    return query, key, value


def _get_added_kv_projections(attn, encoder_hidden_states_img):
    key_img = attn.add_k_proj(encoder_hidden_states_img)
    value_img = attn.add_v_proj(encoder_hidden_states_img)
    return key_img, value_img


class WanAnimateMotionEncoder(nn.Module):
    """Stand-in for the StyleGAN-like motion encoder (runs eagerly, outside the compiled blocks)."""

    def __init__(self, size, out_dim):
        super().__init__()
        self.proj = nn.Linear(3 * size * size, out_dim)

    def forward(self, face_image, channel_dim=1, upcast_to_fp32=True):
        return self.proj(face_image.flatten(1))


class WanAnimateFaceEncoder(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_dim=1024, num_heads=4, kernel_size=3, eps=1e-6, pad_mode="replicate"):
        super().__init__()
        self.num_heads = num_heads
        self.time_causal_padding = (kernel_size - 1, 0)
        self.pad_mode = pad_mode
        self.act = nn.SiLU()
        self.conv1_local = nn.Conv1d(in_dim, hidden_dim * num_heads, kernel_size=kernel_size, stride=1)
        self.conv2 = nn.Conv1d(hidden_dim, hidden_dim, kernel_size, stride=2)
        self.conv3 = nn.Conv1d(hidden_dim, hidden_dim, kernel_size, stride=2)
        self.norm1 = nn.LayerNorm(hidden_dim, eps, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(hidden_dim, eps, elementwise_affine=False)
        self.norm3 = nn.LayerNorm(hidden_dim, eps, elementwise_affine=False)
        self.out_proj = nn.Linear(hidden_dim, out_dim)
        self.padding_tokens = nn.Parameter(torch.zeros(1, 1, 1, out_dim))

    def forward(self, x):
        batch_size = x.shape[0]
        x = x.permute(0, 2, 1)
        x = F.pad(x, self.time_causal_padding, mode=self.pad_mode)
        x = self.conv1_local(x)
        x = x.unflatten(1, (self.num_heads, -1)).flatten(0, 1)
        x = x.permute(0, 2, 1)
        x = self.norm1(x)
        x = self.act(x)
        x = x.permute(0, 2, 1)
        x = F.pad(x, self.time_causal_padding, mode=self.pad_mode)
        x = self.conv2(x)
        x = x.permute(0, 2, 1)
        x = self.norm2(x)
        x = self.act(x)
        x = x.permute(0, 2, 1)
        x = F.pad(x, self.time_causal_padding, mode=self.pad_mode)
        x = self.conv3(x)
        x = x.permute(0, 2, 1)
        x = self.norm3(x)
        x = self.act(x)
        x = self.out_proj(x)
        x = x.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3)
        padding = self.padding_tokens.repeat(batch_size, x.shape[1], 1, 1).to(device=x.device)
        x = torch.cat([x, padding], dim=-2)
        return x


class WanAnimateFaceBlockAttnProcessor:
    _attention_backend = None
    _parallel_config = None

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None):
        hidden_states = attn.pre_norm_q(hidden_states)
        encoder_hidden_states = attn.pre_norm_kv(encoder_hidden_states)
        B, T, N, C = encoder_hidden_states.shape
        query, key, value = _get_qkv_projections(attn, hidden_states, encoder_hidden_states)
        query = query.unflatten(2, (attn.heads, -1))
        key = key.view(B, T, N, attn.heads, -1)
        value = value.view(B, T, N, attn.heads, -1)
        query = attn.norm_q(query)
        key = attn.norm_k(key)
        query = query.unflatten(1, (T, -1)).flatten(0, 1)
        key = key.flatten(0, 1)
        value = value.flatten(0, 1)
        hidden_states = dispatch_attention_fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                              backend=self._attention_backend, parallel_config=self._parallel_config)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = hidden_states.unflatten(0, (B, T)).flatten(1, 2)
        hidden_states = attn.to_out(hidden_states)
        if attention_mask is not None:
            attention_mask = attention_mask.flatten(start_dim=1)
            hidden_states = hidden_states * attention_mask
        return hidden_states


class WanAnimateFaceBlockCrossAttention(nn.Module, AttentionModuleMixin):
    def __init__(self, dim, heads=8, dim_head=64, eps=1e-6, cross_attention_dim_head=None, processor=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.cross_attention_head_dim = cross_attention_dim_head
        self.kv_inner_dim = self.inner_dim if cross_attention_dim_head is None else cross_attention_dim_head * heads
        self.pre_norm_q = nn.LayerNorm(dim, eps, elementwise_affine=False)
        self.pre_norm_kv = nn.LayerNorm(dim, eps, elementwise_affine=False)
        self.to_q = torch.nn.Linear(dim, self.inner_dim, bias=True)
        self.to_k = torch.nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_v = torch.nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_out = torch.nn.Linear(self.inner_dim, dim, bias=True)
        self.norm_q = torch.nn.RMSNorm(dim_head, eps=eps, elementwise_affine=True)
        self.norm_k = torch.nn.RMSNorm(dim_head, eps=eps, elementwise_affine=True)
        self.set_processor(processor)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states, attention_mask)


class WanAttnProcessor:
    _attention_backend = None
    _parallel_config = None

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None):
        encoder_hidden_states_img = None
        if attn.add_k_proj is not None:
            # 512 is the context length of the text encoder, hardcoded for now
            image_context_length = encoder_hidden_states.shape[1] - 512
            encoder_hidden_states_img = encoder_hidden_states[:, :image_context_length]
            encoder_hidden_states = encoder_hidden_states[:, image_context_length:]

        query, key, value = _get_qkv_projections(attn, hidden_states, encoder_hidden_states)

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))

        if rotary_emb is not None:

            def apply_rotary_emb(hidden_states, freqs_cos, freqs_sin):
                x1, x2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
                cos = freqs_cos[..., 0::2]
                sin = freqs_sin[..., 1::2]
                out = torch.empty_like(hidden_states)
                out[..., 0::2] = x1 * cos - x2 * sin
                out[..., 1::2] = x1 * sin + x2 * cos
                return out.type_as(hidden_states)

            query = apply_rotary_emb(query, *rotary_emb)
            key = apply_rotary_emb(key, *rotary_emb)

        hidden_states_img = None
        if encoder_hidden_states_img is not None:
            key_img, value_img = _get_added_kv_projections(attn, encoder_hidden_states_img)
            key_img = attn.norm_added_k(key_img)
            key_img = key_img.unflatten(2, (attn.heads, -1))
            value_img = value_img.unflatten(2, (attn.heads, -1))
            hidden_states_img = dispatch_attention_fn(query, key_img, value_img, attn_mask=None, dropout_p=0.0,
                                                      is_causal=False, backend=self._attention_backend,
                                                      parallel_config=self._parallel_config)
            hidden_states_img = hidden_states_img.flatten(2, 3)
            hidden_states_img = hidden_states_img.type_as(query)

        hidden_states = dispatch_attention_fn(query, key, value, attn_mask=attention_mask, dropout_p=0.0,
                                              is_causal=False, backend=self._attention_backend,
                                              parallel_config=self._parallel_config)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)

        if hidden_states_img is not None:
            hidden_states = hidden_states + hidden_states_img

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class WanAttention(torch.nn.Module, AttentionModuleMixin):
    def __init__(self, dim, heads=8, dim_head=64, eps=1e-5, dropout=0.0, added_kv_proj_dim=None,
                 cross_attention_dim_head=None, processor=None, is_cross_attention=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.cross_attention_dim_head = cross_attention_dim_head
        self.kv_inner_dim = self.inner_dim if cross_attention_dim_head is None else cross_attention_dim_head * heads
        self.to_q = torch.nn.Linear(dim, self.inner_dim, bias=True)
        self.to_k = torch.nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_v = torch.nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_out = torch.nn.ModuleList([torch.nn.Linear(self.inner_dim, dim, bias=True), torch.nn.Dropout(dropout)])
        self.norm_q = torch.nn.RMSNorm(dim_head * heads, eps=eps, elementwise_affine=True)
        self.norm_k = torch.nn.RMSNorm(dim_head * heads, eps=eps, elementwise_affine=True)
        self.add_k_proj = self.add_v_proj = None
        if added_kv_proj_dim is not None:
            self.add_k_proj = torch.nn.Linear(added_kv_proj_dim, self.inner_dim, bias=True)
            self.add_v_proj = torch.nn.Linear(added_kv_proj_dim, self.inner_dim, bias=True)
            self.norm_added_k = torch.nn.RMSNorm(dim_head * heads, eps=eps)
        self.is_cross_attention = cross_attention_dim_head is not None
        self.set_processor(processor)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None, **kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states, attention_mask, rotary_emb, **kwargs)


class WanImageEmbedding(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int, pos_embed_seq_len=None):
        super().__init__()
        self.norm1 = FP32LayerNorm(in_features)
        self.ff = FeedForward(in_features, out_features, mult=1, activation_fn="gelu")
        self.norm2 = FP32LayerNorm(out_features)
        self.pos_embed = None

    def forward(self, encoder_hidden_states_image):
        hidden_states = self.norm1(encoder_hidden_states_image)
        hidden_states = self.ff(hidden_states)
        hidden_states = self.norm2(hidden_states)
        return hidden_states


class WanTimeTextImageEmbedding(nn.Module):
    def __init__(self, dim, time_freq_dim, time_proj_dim, text_embed_dim, image_embed_dim=None,
                 pos_embed_seq_len=None):
        super().__init__()
        self.timesteps_proj = Timesteps(num_channels=time_freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.act_fn = nn.SiLU()
        self.time_proj = nn.Linear(dim, time_proj_dim)
        self.text_embedder = PixArtAlphaTextProjection(text_embed_dim, dim, act_fn="gelu_tanh")
        self.image_embedder = None
        if image_embed_dim is not None:
            self.image_embedder = WanImageEmbedding(image_embed_dim, dim, pos_embed_seq_len=pos_embed_seq_len)

    def forward(self, timestep, encoder_hidden_states, encoder_hidden_states_image=None, timestep_seq_len=None):
        timestep = self.timesteps_proj(timestep)
        if timestep_seq_len is not None:
            timestep = timestep.unflatten(0, (-1, timestep_seq_len))
        time_embedder_dtype = next(iter(self.time_embedder.parameters())).dtype
        if timestep.dtype != time_embedder_dtype and time_embedder_dtype != torch.int8:
            timestep = timestep.to(time_embedder_dtype)
        temb = self.time_embedder(timestep).type_as(encoder_hidden_states)
        timestep_proj = self.time_proj(self.act_fn(temb))
        encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        if encoder_hidden_states_image is not None:
            encoder_hidden_states_image = self.image_embedder(encoder_hidden_states_image)
        return temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image


class WanRotaryPosEmbed(nn.Module):
    def __init__(self, attention_head_dim, patch_size, max_seq_len, theta=10000.0):
        super().__init__()
        self.attention_head_dim = attention_head_dim
        self.patch_size = patch_size
        self.max_seq_len = max_seq_len
        h_dim = w_dim = 2 * (attention_head_dim // 6)
        t_dim = attention_head_dim - h_dim - w_dim
        freqs_dtype = torch.float32 if torch.backends.mps.is_available() else torch.float64
        freqs_cos = []
        freqs_sin = []
        for dim in [t_dim, h_dim, w_dim]:
            freq_cos, freq_sin = get_1d_rotary_pos_embed(dim, max_seq_len, theta, use_real=True,
                                                         repeat_interleave_real=True, freqs_dtype=freqs_dtype)
            freqs_cos.append(freq_cos)
            freqs_sin.append(freq_sin)
        self.register_buffer("freqs_cos", torch.cat(freqs_cos, dim=1), persistent=False)
        self.register_buffer("freqs_sin", torch.cat(freqs_sin, dim=1), persistent=False)

    def forward(self, hidden_states):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        ppf, pph, ppw = num_frames // p_t, height // p_h, width // p_w
        split_sizes = [
            self.attention_head_dim - 2 * (self.attention_head_dim // 3),
            self.attention_head_dim // 3,
            self.attention_head_dim // 3,
        ]
        freqs_cos = self.freqs_cos.split(split_sizes, dim=1)
        freqs_sin = self.freqs_sin.split(split_sizes, dim=1)
        freqs_cos_f = freqs_cos[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_h = freqs_cos[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_w = freqs_cos[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_f = freqs_sin[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_h = freqs_sin[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_w = freqs_sin[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_cos = torch.cat([freqs_cos_f, freqs_cos_h, freqs_cos_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        freqs_sin = torch.cat([freqs_sin_f, freqs_sin_h, freqs_sin_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        return freqs_cos, freqs_sin


class WanTransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, qk_norm="rms_norm_across_heads", cross_attn_norm=False, eps=1e-6,
                 added_kv_proj_dim=None):
        super().__init__()
        # 1. Self-attention
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = WanAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                  cross_attention_dim_head=None, processor=WanAttnProcessor())
        # 2. Cross-attention
        self.attn2 = WanAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                  added_kv_proj_dim=added_kv_proj_dim, cross_attention_dim_head=dim // num_heads,
                                  processor=WanAttnProcessor())
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True) if cross_attn_norm else nn.Identity()
        # 3. Feed-forward
        self.ffn = FeedForward(dim, inner_dim=ffn_dim, activation_fn="gelu-approximate")
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim**0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb, rotary_emb):
        if temb.ndim == 4:
            shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
                self.scale_shift_table.unsqueeze(0) + temb.float()
            ).chunk(6, dim=2)
            shift_msa = shift_msa.squeeze(2)
            scale_msa = scale_msa.squeeze(2)
            gate_msa = gate_msa.squeeze(2)
            c_shift_msa = c_shift_msa.squeeze(2)
            c_scale_msa = c_scale_msa.squeeze(2)
            c_gate_msa = c_gate_msa.squeeze(2)
        else:
            shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
                self.scale_shift_table + temb.float()
            ).chunk(6, dim=1)

        # 1. Self-attention
        norm_hidden_states = (self.norm1(hidden_states.float()) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn_output = self.attn1(norm_hidden_states, None, None, rotary_emb)
        hidden_states = (hidden_states.float() + attn_output * gate_msa).type_as(hidden_states)

        # 2. Cross-attention
        norm_hidden_states = self.norm2(hidden_states.float()).type_as(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states, None, None)
        hidden_states = hidden_states + attn_output

        # 3. Feed-forward
        norm_hidden_states = (self.norm3(hidden_states.float()) * (1 + c_scale_msa) + c_shift_msa).type_as(
            hidden_states
        )
        ff_output = self.ffn(norm_hidden_states)
        hidden_states = (hidden_states.float() + ff_output.float() * c_gate_msa).type_as(hidden_states)

        return hidden_states


class WanAnimateTransformer3DModel(ModelMixin):
    _repeated_blocks = ["WanTransformerBlock"]

    def __init__(self, patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=36,
                 latent_channels=16, out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40,
                 cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=1280,
                 added_kv_proj_dim=None, rope_max_seq_len=1024, pos_embed_seq_len=None,
                 motion_encoder_size=512, motion_encoder_dim=512, face_encoder_hidden_dim=1024,
                 face_encoder_num_heads=4, inject_face_latents_blocks=5):
        super().__init__()
        self.config = Config(patch_size=patch_size, inject_face_latents_blocks=inject_face_latents_blocks)
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or latent_channels

        # 1. Patch & position embedding
        self.rope = WanRotaryPosEmbed(attention_head_dim, patch_size, rope_max_seq_len)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.pose_patch_embedding = nn.Conv3d(latent_channels, inner_dim, kernel_size=patch_size, stride=patch_size)

        # 2. Condition embeddings
        self.condition_embedder = WanTimeTextImageEmbedding(dim=inner_dim, time_freq_dim=freq_dim,
                                                            time_proj_dim=inner_dim * 6, text_embed_dim=text_dim,
                                                            image_embed_dim=image_dim,
                                                            pos_embed_seq_len=pos_embed_seq_len)
        self.motion_encoder = WanAnimateMotionEncoder(size=motion_encoder_size, out_dim=motion_encoder_dim)
        self.face_encoder = WanAnimateFaceEncoder(in_dim=motion_encoder_dim, out_dim=inner_dim,
                                                  hidden_dim=face_encoder_hidden_dim,
                                                  num_heads=face_encoder_num_heads)

        # 3. Transformer blocks
        self.blocks = nn.ModuleList(
            [
                WanTransformerBlock(dim=inner_dim, ffn_dim=ffn_dim, num_heads=num_attention_heads, qk_norm=qk_norm,
                                    cross_attn_norm=cross_attn_norm, eps=eps, added_kv_proj_dim=added_kv_proj_dim)
                for _ in range(num_layers)
            ]
        )
        self.face_adapter = nn.ModuleList(
            [
                WanAnimateFaceBlockCrossAttention(dim=inner_dim, heads=num_attention_heads,
                                                  dim_head=inner_dim // num_attention_heads, eps=eps,
                                                  cross_attention_dim_head=inner_dim // num_attention_heads,
                                                  processor=WanAnimateFaceBlockAttnProcessor())
                for _ in range(num_layers // inject_face_latents_blocks)
            ]
        )

        # 4. Output norm & projection
        self.norm_out = FP32LayerNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, inner_dim) / inner_dim**0.5)
        self.gradient_checkpointing = False

    def motion_batch_encode(self, face_pixel_values, batch_size=8, upcast_to_fp32=True):
        if batch_size >= face_pixel_values.shape[0]:
            motion_vec = self.motion_encoder(face_pixel_values, upcast_to_fp32)
        else:
            motion_vec_batches = []
            for i in range(math.ceil(face_pixel_values.shape[0] / batch_size)):
                face_pixel_values_batch = face_pixel_values[i * batch_size : (i + 1) * batch_size]
                motion_vec_batch = self.motion_encoder(face_pixel_values_batch, upcast_to_fp32)
                motion_vec_batches.append(motion_vec_batch)
            motion_vec = torch.cat(motion_vec_batches)
        return motion_vec

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_hidden_states_image=None,
                pose_hidden_states=None, face_pixel_values=None, motion_encode_batch_size=8, upcast_to_fp32=True,
                return_dict=True, attention_kwargs=None):
        if pose_hidden_states is not None and pose_hidden_states.shape[2] + 1 != hidden_states.shape[2]:
            raise ValueError("pose_hidden_states frame dim must be one less than hidden_states'")

        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.config.patch_size
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p_h
        post_patch_width = width // p_w

        # 1. Rotary position embedding
        rotary_emb = self.rope(hidden_states)

        # 2. Patch embedding
        hidden_states = self.patch_embedding(hidden_states)
        pose_hidden_states = self.pose_patch_embedding(pose_hidden_states)
        # Add pose embeddings to hidden states
        hidden_states[:, :, 1:] = hidden_states[:, :, 1:] + pose_hidden_states
        # Calling contiguous() here is important so that we don't recompile when performing regional compilation
        hidden_states = hidden_states.flatten(2).transpose(1, 2).contiguous()

        # 3. Condition embeddings (time, text, image)
        if timestep.ndim == 2:
            ts_seq_len = timestep.shape[1]
            timestep = timestep.flatten()
        else:
            ts_seq_len = None

        temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image = self.condition_embedder(
            timestep, encoder_hidden_states, encoder_hidden_states_image, timestep_seq_len=ts_seq_len
        )

        if ts_seq_len is not None:
            timestep_proj = timestep_proj.unflatten(2, (6, -1))
        else:
            timestep_proj = timestep_proj.unflatten(1, (6, -1))

        if encoder_hidden_states_image is not None:
            encoder_hidden_states = torch.concat([encoder_hidden_states_image, encoder_hidden_states], dim=1)

        # 4. Get motion features from the face video
        batch_size, channels, num_face_frames, height, width = face_pixel_values.shape
        face_pixel_values = face_pixel_values.permute(0, 2, 1, 3, 4).reshape(-1, channels, height, width)
        motion_vec = self.motion_batch_encode(face_pixel_values, motion_encode_batch_size, upcast_to_fp32)
        motion_vec = motion_vec.view(batch_size, num_face_frames, -1)
        motion_vec = self.face_encoder(motion_vec)
        _, T_motion, H_motion, C_motion = motion_vec.shape
        pad_face = torch.zeros(batch_size, 1, H_motion, C_motion, dtype=motion_vec.dtype, device=motion_vec.device)
        motion_vec = torch.cat([pad_face, motion_vec], dim=1)

        # 5. Transformer blocks with face adapter integration
        for block_idx, block in enumerate(self.blocks):
            if torch.is_grad_enabled() and self.gradient_checkpointing:
                hidden_states = self._gradient_checkpointing_func(
                    block, hidden_states, encoder_hidden_states, timestep_proj, rotary_emb
                )
            else:
                hidden_states = block(hidden_states, encoder_hidden_states, timestep_proj, rotary_emb)

            # Face adapter integration: apply after every 5th block (0, 5, 10, 15, ...)
            if block_idx % self.config.inject_face_latents_blocks == 0:
                face_adapter_block_idx = block_idx // self.config.inject_face_latents_blocks
                face_adapter_output = self.face_adapter[face_adapter_block_idx](hidden_states, motion_vec)
                face_adapter_output = face_adapter_output.to(device=hidden_states.device)
                hidden_states = face_adapter_output + hidden_states

        # 6. Output norm, projection & unpatchify
        if temb.ndim == 3:
            shift, scale = (self.scale_shift_table.unsqueeze(0).to(temb.device) + temb.unsqueeze(2)).chunk(2, dim=2)
            shift = shift.squeeze(2)
            scale = scale.squeeze(2)
        else:
            shift, scale = (self.scale_shift_table.to(temb.device) + temb.unsqueeze(1)).chunk(2, dim=1)

        hidden_states_original_dtype = hidden_states.dtype
        hidden_states = self.norm_out(hidden_states.float())
        shift = shift.to(hidden_states.device)
        scale = scale.to(hidden_states.device)
        hidden_states = (hidden_states * (1 + scale) + shift).to(dtype=hidden_states_original_dtype)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(
            batch_size, post_patch_num_frames, post_patch_height, post_patch_width, p_t, p_h, p_w, -1
        )
        hidden_states = hidden_states.permute(0, 7, 1, 4, 2, 5, 3, 6)
        output = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (output,)


# tests/models/transformers/test_models_transformer_wan_animate.py config (sizes shrunk) and
# TorchCompileTesterMixin.test_torch_compile_repeated_blocks (model.compile_repeated_blocks(fullgraph=True),
# then the model called repeatedly under no_grad)
torch.manual_seed(0)
model = WanAnimateTransformer3DModel(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=12, latent_channels=4,
    out_channels=4, text_dim=16, freq_dim=256, ffn_dim=32, num_layers=2, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", image_dim=16, rope_max_seq_len=32, motion_encoder_size=8,
    motion_encoder_dim=16, face_encoder_hidden_dim=16, face_encoder_num_heads=2, inject_face_latents_blocks=2,
).eval()
model.compile_repeated_blocks(fullgraph=True, backend=counting_backend)

batch_size, num_channels, num_frames, height, width = 1, 4, 20, 4, 4
checksum = 0.0
with torch.no_grad():
    for step in range(3):  # denoising steps
        hidden_states = torch.randn(batch_size, 2 * num_channels + 4, num_frames + 1, height, width)
        timestep = torch.tensor([999 - 300 * step])
        encoder_hidden_states = torch.randn(batch_size, 12, 16)
        clip_ref_features = torch.randn(batch_size, 12, 16)
        pose_latents = torch.randn(batch_size, num_channels, num_frames, height, width)
        face_pixel_values = torch.randn(batch_size, 3, 77, 8, 8)
        out = model(hidden_states=hidden_states, timestep=timestep, encoder_hidden_states=encoder_hidden_states,
                    encoder_hidden_states_image=clip_ref_features, pose_hidden_states=pose_latents,
                    face_pixel_values=face_pixel_values)[0]
        checksum += out.double().sum().item()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
