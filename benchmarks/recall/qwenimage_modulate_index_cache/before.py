# Reproduction of huggingface/diffusers QwenImageTransformer2DModel BEFORE bb43eee083 (PR branch
# "fix: cache modulate_index in QwenImageTransformer2DModel to avoid per-step DtoH sync", d2d5fdad96, then
# fixed by bb43eee083): with zero_cond_t=True, forward memoises `modulate_index` in the dict attribute
# `self._modulate_index_cache[(img_shapes, device)]` from inside the compiled forward.
# (src/diffusers/models/transformers/transformer_qwenimage.py at bb43eee083^, trimmed.)
import math
from math import prod
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- minimal stand-ins for diffusers helpers -----------------------------------------------------
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
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


class FeedForward(nn.Module):  # gelu-approximate, mult 4
    def __init__(self, dim, dim_out):
        super().__init__()
        self.proj = nn.Linear(dim, dim * 4)
        self.out = nn.Linear(dim * 4, dim_out)

    def forward(self, x):
        return self.out(F.gelu(self.proj(x), approximate="tanh"))


class JointAttention(nn.Module):
    """Stand-in for Attention + QwenDoubleStreamAttnProcessor2_0 (joint text/image SDPA, no RoPE)."""

    def __init__(self, dim, heads, head_dim):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, 3 * heads * head_dim)
        self.add_qkv = nn.Linear(dim, 3 * heads * head_dim)
        self.to_out = nn.Linear(heads * head_dim, dim)
        self.to_add_out = nn.Linear(heads * head_dim, dim)

    def forward(self, hidden_states, encoder_hidden_states, encoder_hidden_states_mask=None,
                image_rotary_emb=None, **kwargs):
        s_txt = encoder_hidden_states.shape[1]
        qkv = torch.cat([self.add_qkv(encoder_hidden_states), self.to_qkv(hidden_states)], dim=1)
        q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
        out = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        return self.to_out(out[:, s_txt:]), self.to_add_out(out[:, :s_txt])


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class AdaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=False, eps=1e-6):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2)
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]


# ---- transformer_qwenimage.py --------------------------------------------------------------------
def compute_text_seq_len_from_mask(encoder_hidden_states, encoder_hidden_states_mask):
    batch_size, text_seq_len = encoder_hidden_states.shape[:2]
    if encoder_hidden_states_mask is None:
        return text_seq_len, None, None
    raise NotImplementedError("mask path not exercised by this reproduction")


class QwenTimestepProjEmbeddings(nn.Module):
    def __init__(self, embedding_dim, use_additional_t_cond=False):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.use_additional_t_cond = use_additional_t_cond

    def forward(self, timestep, hidden_states, addition_t_cond=None):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_states.dtype))  # (N, D)
        conditioning = timesteps_emb
        return conditioning


class QwenImageTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, qk_norm="rms_norm", eps=1e-6,
                 zero_cond_t=False):
        super().__init__()
        self.dim = dim
        self.img_mod = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim, bias=True))
        self.img_norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.attn = JointAttention(dim, num_attention_heads, attention_head_dim)
        self.img_norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.img_mlp = FeedForward(dim=dim, dim_out=dim)
        self.txt_mod = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim, bias=True))
        self.txt_norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.txt_norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.txt_mlp = FeedForward(dim=dim, dim_out=dim)
        self.zero_cond_t = zero_cond_t

    def _modulate(self, x, mod_params, index=None):
        shift, scale, gate = mod_params.chunk(3, dim=-1)
        if index is not None:
            actual_batch = shift.size(0) // 2
            shift_0, shift_1 = shift[:actual_batch], shift[actual_batch:]
            scale_0, scale_1 = scale[:actual_batch], scale[actual_batch:]
            gate_0, gate_1 = gate[:actual_batch], gate[actual_batch:]
            index_expanded = index.unsqueeze(-1)  # [b, l, 1]
            shift_0_exp = shift_0.unsqueeze(1)
            shift_1_exp = shift_1.unsqueeze(1)
            scale_0_exp = scale_0.unsqueeze(1)
            scale_1_exp = scale_1.unsqueeze(1)
            gate_0_exp = gate_0.unsqueeze(1)
            gate_1_exp = gate_1.unsqueeze(1)
            shift_result = torch.where(index_expanded == 0, shift_0_exp, shift_1_exp)
            scale_result = torch.where(index_expanded == 0, scale_0_exp, scale_1_exp)
            gate_result = torch.where(index_expanded == 0, gate_0_exp, gate_1_exp)
        else:
            shift_result = shift.unsqueeze(1)
            scale_result = scale.unsqueeze(1)
            gate_result = gate.unsqueeze(1)
        return x * (1 + scale_result) + shift_result, gate_result

    def forward(self, hidden_states, encoder_hidden_states, encoder_hidden_states_mask, temb,
                image_rotary_emb=None, joint_attention_kwargs=None, modulate_index=None):
        img_mod_params = self.img_mod(temb)  # [B, 6*dim]
        if self.zero_cond_t:
            temb = torch.chunk(temb, 2, dim=0)[0]
        txt_mod_params = self.txt_mod(temb)  # [B, 6*dim]
        img_mod1, img_mod2 = img_mod_params.chunk(2, dim=-1)
        txt_mod1, txt_mod2 = txt_mod_params.chunk(2, dim=-1)

        img_normed = self.img_norm1(hidden_states)
        img_modulated, img_gate1 = self._modulate(img_normed, img_mod1, modulate_index)
        txt_normed = self.txt_norm1(encoder_hidden_states)
        txt_modulated, txt_gate1 = self._modulate(txt_normed, txt_mod1)

        joint_attention_kwargs = joint_attention_kwargs or {}
        attn_output = self.attn(hidden_states=img_modulated, encoder_hidden_states=txt_modulated,
                                encoder_hidden_states_mask=encoder_hidden_states_mask,
                                image_rotary_emb=image_rotary_emb, **joint_attention_kwargs)
        img_attn_output, txt_attn_output = attn_output
        hidden_states = hidden_states + img_gate1 * img_attn_output
        encoder_hidden_states = encoder_hidden_states + txt_gate1 * txt_attn_output

        img_normed2 = self.img_norm2(hidden_states)
        img_modulated2, img_gate2 = self._modulate(img_normed2, img_mod2, modulate_index)
        img_mlp_output = self.img_mlp(img_modulated2)
        hidden_states = hidden_states + img_gate2 * img_mlp_output

        txt_normed2 = self.txt_norm2(encoder_hidden_states)
        txt_modulated2, txt_gate2 = self._modulate(txt_normed2, txt_mod2)
        txt_mlp_output = self.txt_mlp(txt_modulated2)
        encoder_hidden_states = encoder_hidden_states + txt_gate2 * txt_mlp_output

        if encoder_hidden_states.dtype == torch.float16:
            encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)
        if hidden_states.dtype == torch.float16:
            hidden_states = hidden_states.clip(-65504, 65504)
        return encoder_hidden_states, hidden_states


class QwenImageTransformer2DModel(nn.Module):
    def __init__(self, patch_size=2, in_channels=64, out_channels=16, num_layers=60, attention_head_dim=128,
                 num_attention_heads=24, joint_attention_dim=3584, guidance_embeds=False,
                 axes_dims_rope=(16, 56, 56), zero_cond_t=False, use_additional_t_cond=False,
                 use_layer3d_rope=False):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.time_text_embed = QwenTimestepProjEmbeddings(embedding_dim=self.inner_dim,
                                                          use_additional_t_cond=use_additional_t_cond)
        self.txt_norm = RMSNorm(joint_attention_dim, eps=1e-6)
        self.img_in = nn.Linear(in_channels, self.inner_dim)
        self.txt_in = nn.Linear(joint_attention_dim, self.inner_dim)
        self.transformer_blocks = nn.ModuleList(
            [
                QwenImageTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                          attention_head_dim=attention_head_dim, zero_cond_t=zero_cond_t)
                for _ in range(num_layers)
            ]
        )
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)
        self.gradient_checkpointing = False
        self.zero_cond_t = zero_cond_t

        # Cache for modulate_index tensor to avoid rebuilding it on every forward pass.
        # The tensor is determined solely by img_shapes (fixed during inference), so it
        # only needs to be computed once per unique (img_shapes, device) combination.
        # Without caching, every forward call triggers a Python list comprehension +
        # torch.tensor() construction which is visible as CPU overhead in profiling traces.
        self._modulate_index_cache: dict = {}

    def forward(self, hidden_states, encoder_hidden_states=None, encoder_hidden_states_mask=None, timestep=None,
                img_shapes=None, txt_seq_lens=None, guidance=None, attention_kwargs=None,
                controlnet_block_samples=None, additional_t_cond=None, return_dict=True):
        hidden_states = self.img_in(hidden_states)

        timestep = timestep.to(hidden_states.dtype)

        if self.zero_cond_t:
            timestep = torch.cat([timestep, timestep * 0], dim=0)
            # Cache modulate_index to avoid rebuilding it on every forward pass.
            # img_shapes is fixed during inference (same across all denoising steps),
            # so we can build the tensor once and reuse it, eliminating the CPU overhead
            # and implicit sync from torch.tensor() on each step.
            device = timestep.device
            cache_key = (tuple(tuple(s) for s in img_shapes), device)
            if cache_key not in self._modulate_index_cache:
                self._modulate_index_cache[cache_key] = torch.tensor(
                    [[0] * prod(sample[0]) + [1] * sum([prod(s) for s in sample[1:]]) for sample in img_shapes],
                    device=device,
                    dtype=torch.int,
                )
            modulate_index = self._modulate_index_cache[cache_key]
        else:
            modulate_index = None

        encoder_hidden_states = self.txt_norm(encoder_hidden_states)
        encoder_hidden_states = self.txt_in(encoder_hidden_states)

        text_seq_len, _, encoder_hidden_states_mask = compute_text_seq_len_from_mask(
            encoder_hidden_states, encoder_hidden_states_mask
        )

        temb = self.time_text_embed(timestep, hidden_states, additional_t_cond)

        image_rotary_emb = None  # QwenEmbedRope omitted (see NOTES.md)

        block_attention_kwargs = attention_kwargs.copy() if attention_kwargs is not None else {}

        for index_block, block in enumerate(self.transformer_blocks):
            encoder_hidden_states, hidden_states = block(
                hidden_states=hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                encoder_hidden_states_mask=None,
                temb=temb,
                image_rotary_emb=image_rotary_emb,
                joint_attention_kwargs=block_attention_kwargs,
                modulate_index=modulate_index,
            )

        if self.zero_cond_t:
            temb = temb.chunk(2, dim=0)[0]
        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)


# tests/models/transformers/test_models_transformer_qwenimage.py dummy config with zero_cond_t=True (the
# QwenImage-Edit-2511 setting), compiled whole with fullgraph=True as in
# test_torch_compile_recompilation_and_graph_break, then called once per denoising step with the same
# img_shapes (target image + one reference image).
torch.manual_seed(0)
model = QwenImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=2,
                                    attention_head_dim=16, num_attention_heads=3, joint_attention_dim=16,
                                    axes_dims_rope=(8, 4, 4), zero_cond_t=True).eval()
model = torch.compile(model, fullgraph=True, backend=counting_backend)

batch_size, height, width, seq_txt = 1, 4, 4, 7
img_shapes = [[(1, height, width), (1, height, width)]] * batch_size
out = 0.0
with torch.no_grad():
    for step in range(3):
        hidden_states = torch.randn(batch_size, 2 * height * width, 16)
        encoder_hidden_states = torch.randn(batch_size, seq_txt, 16)
        timestep = torch.tensor([1.0 - step / 3]).expand(batch_size)
        out += model(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                     timestep=timestep, img_shapes=img_shapes)[0].sum().item()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
