# Reproduction of unslothai/unsloth studio ConvRot (MiniMax-H3 int8 denoiser) BEFORE 186e6cb5c1
# ("MiniMax-H3: build the ConvRot Linear class once, not once per projection", #8357).
# studio/backend/core/inference/diffusion_convrot.py (verbatim, docstrings trimmed),
# diffusion_transformer_quant.make_filter_fn, diffusion_speed._compile_repeated_blocks (trimmed),
# and a small MiniMax-H3 transformer (diffusers transformer_minimax_h3.py, trimmed) as the denoiser.
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Iterable, Optional, Tuple
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ============================ studio/backend/core/inference/diffusion_convrot.py ============================
CONVROT_KIND = "convrot_hadamard_v1"
ROTATION_KEY = "activation_rotation"
ROTATION_GROUP_KEY = "activation_rotation_group"
ROTATION_FQNS_KEY = "activation_rotation_fqns"
DEFAULT_CONVROT_GROUPSIZE = 256
CONVROT_ATTR = "_unsloth_activation_rotation"


def is_power_of_four(size: Any) -> bool:
    if not isinstance(size, int) or isinstance(size, bool):
        return False
    n = size
    if n < 4 or n & (n - 1):
        return False
    return (n.bit_length() - 1) % 2 == 0


_HADAMARD_CACHE: dict = {}


def build_convrot_hadamard(
    size: int,
    device: Any = "cpu",
    dtype: Any = None,
) -> Any:
    import torch

    if dtype is None:
        dtype = torch.float32
    key = (size, str(device), dtype)
    cached = _HADAMARD_CACHE.get(key)
    if cached is not None:
        return cached
    if not is_power_of_four(size):
        raise ValueError(f"ConvRot group size must be a power of 4, got {size}")
    h4 = torch.tensor(
        [[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]],
        dtype = dtype,
        device = device,
    )
    h = h4
    current = 4
    while current < size:
        h = torch.kron(h, h4)
        current *= 4
    h = h / (size**0.5)
    _HADAMARD_CACHE[key] = h
    return h


def rotate_convrot_activation(x: Any, h: Any, group_size: int) -> Any:
    """``x @ H`` blockwise over the last dimension."""
    shape = x.shape
    features = shape[-1]
    if features % group_size != 0:
        raise ValueError(f"features {features} not divisible by ConvRot group {group_size}")
    grouped = x.reshape(-1, features // group_size, group_size)
    return grouped.matmul(h.to(dtype = x.dtype, device = x.device)).reshape(shape)


def rotate_convrot_weight_(module: Any, group_size: int) -> None:
    import torch

    weight = module.weight.data
    out_features, in_features = weight.shape
    if in_features % group_size:
        raise ValueError(
            f"in_features {in_features} is not divisible by the ConvRot group {group_size}"
        )
    h = build_convrot_hadamard(group_size, device = weight.device, dtype = torch.float32)
    rotated = torch.matmul(
        weight.float().reshape(out_features, in_features // group_size, group_size), h.T
    ).reshape(out_features, in_features)
    module.weight.data = rotated.to(weight.dtype)


def convrot_linear_class() -> Any:
    """The ``nn.Linear`` subclass that rotates its input, built lazily so importing this module
    never imports torch."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class ConvRotLinear(nn.Linear):
        """``nn.Linear`` whose input is block-Hadamard rotated before the matmul."""

        convrot_groupsize: int = DEFAULT_CONVROT_GROUPSIZE

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            group = self.convrot_groupsize
            h = build_convrot_hadamard(group, device = x.device, dtype = x.dtype)
            return F.linear(rotate_convrot_activation(x, h, group), self.weight, self.bias)

        def extra_repr(self) -> str:  # pragma: no cover - debug aid
            return f"{super().extra_repr()}, convrot(group={self.convrot_groupsize})"

    return ConvRotLinear


def is_rotated_linear(module: Any) -> bool:
    """True when ``module`` already applies the online rotation to its own input."""
    return type(module).__name__ == "ConvRotLinear" and hasattr(module, "convrot_groupsize")


def _install_rotation(module: Any, group_size: int) -> None:
    """Swap ``module`` onto the rotating subclass, in place."""
    module.convrot_groupsize = int(group_size)
    module.__class__ = convrot_linear_class()


def declares_rotation(metadata: Any) -> bool:
    return isinstance(metadata, dict) and metadata.get(ROTATION_KEY) not in (None, "")


def rotation_metadata_error(metadata: Any) -> Optional[str]:
    if not declares_rotation(metadata):
        return None
    kind = metadata.get(ROTATION_KEY)
    if kind != CONVROT_KIND:
        return f"unsupported activation rotation {kind!r} (this build implements {CONVROT_KIND!r})"
    group = metadata.get(ROTATION_GROUP_KEY)
    if not is_power_of_four(group):
        return (
            f"activation rotation group {group!r} is not a power of 4; the Hadamard is built as a "
            "kron power of H4"
        )
    fqns = metadata.get(ROTATION_FQNS_KEY)
    if not isinstance(fqns, (list, tuple)) or not fqns:
        return f"activation rotation records no fqns ({ROTATION_FQNS_KEY} is {fqns!r})"
    if not all(isinstance(fqn, str) and fqn for fqn in fqns):
        return f"activation rotation {ROTATION_FQNS_KEY} has non-string entries"
    if len(set(fqns)) != len(fqns):
        return f"activation rotation {ROTATION_FQNS_KEY} has duplicates"
    return None


def rotation_metadata(group_size: int, fqns: Iterable[str]) -> dict:
    return {
        ROTATION_KEY: CONVROT_KIND,
        ROTATION_GROUP_KEY: int(group_size),
        ROTATION_FQNS_KEY: sorted(fqns),
    }


def rotatable_fqns(
    transformer: Any,
    filter_fn: Any,
    group_size: int = DEFAULT_CONVROT_GROUPSIZE,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    from torch import nn

    rotatable: list[str] = []
    not_divisible: list[str] = []
    for fqn, module in transformer.named_modules():
        if not isinstance(module, nn.Linear) or not filter_fn(module, fqn):
            continue
        (rotatable if module.in_features % group_size == 0 else not_divisible).append(fqn)
    return tuple(rotatable), tuple(not_divisible)


def rotate_linears_(
    transformer: Any,
    fqns: Iterable[str],
    group_size: int = DEFAULT_CONVROT_GROUPSIZE,
) -> tuple[str, ...]:
    """OFFLINE half: rotate the weights of ``fqns`` and install the online rotation on each."""
    from torch import nn

    if not is_power_of_four(group_size):
        raise ValueError(f"ConvRot group size must be a power of 4, got {group_size!r}")
    modules = dict(transformer.named_modules())
    rotated: list[str] = []
    for fqn in fqns:
        module = modules.get(fqn)
        if not isinstance(module, nn.Linear):
            raise ValueError(f"cannot rotate {fqn!r}: not an nn.Linear on this model")
        rotate_convrot_weight_(module, group_size)
        _install_rotation(module, group_size)
        rotated.append(fqn)
    return tuple(rotated)


def apply_activation_rotation(
    transformer: Any,
    metadata: Any,
    *,
    logger: Any = None,
) -> tuple[str, ...]:
    """ONLINE half: install the input rotation on exactly the fqns ``metadata`` records."""
    if not declares_rotation(metadata):
        return ()
    problem = rotation_metadata_error(metadata)
    if problem:
        raise ValueError(problem)

    from torch import nn

    group_size = int(metadata[ROTATION_GROUP_KEY])
    fqns = list(metadata[ROTATION_FQNS_KEY])
    modules = dict(transformer.named_modules())
    missing = [fqn for fqn in fqns if fqn not in modules]
    if missing:
        raise ValueError(
            f"activation rotation names {len(missing)} fqn(s) this model does not have "
            f"(e.g. {missing[0]!r}); the checkpoint and this build disagree about the model"
        )
    for fqn in fqns:
        module = modules[fqn]
        if not isinstance(module, nn.Linear):
            raise ValueError(f"activation rotation target {fqn!r} is not an nn.Linear")
        if is_rotated_linear(module):
            raise ValueError(f"activation rotation target {fqn!r} is already rotated")
        if module.in_features % group_size:
            raise ValueError(
                f"activation rotation target {fqn!r} has in_features {module.in_features}, "
                f"which the recorded group {group_size} does not divide"
            )
    for fqn in fqns:
        _install_rotation(modules[fqn], group_size)
    try:
        setattr(
            transformer,
            CONVROT_ATTR,
            {"kind": CONVROT_KIND, "group": group_size, "linears": len(fqns)},
        )
    except Exception:  # noqa: BLE001 -- the marker is a diagnostic, never the mechanism
        pass
    if logger is not None:
        logger.info(
            "diffusion.convrot: installed %s on %d linears at group %d",
            CONVROT_KIND,
            len(fqns),
            group_size,
        )
    return tuple(fqns)


# ============================ diffusion_transformer_quant.make_filter_fn ============================
_MINIMAX_H3_INT8_EXCLUDES = ("adaln_proj",)


def make_filter_fn(
    min_features: int,
    exclude_name_tokens: tuple[str, ...] = (),
    *,
    require_bf16: bool = False,
    require_divisible: int = 0,
):
    def filter_fn(module: Any, fqn: str = "") -> bool:
        try:
            import torch
            if not isinstance(module, torch.nn.Linear):
                return False
        except Exception:
            return False
        in_features = getattr(module, "in_features", None)
        out_features = getattr(module, "out_features", None)
        if in_features is None or out_features is None:
            return False
        if in_features < min_features or out_features < min_features:
            return False
        if require_divisible and (
            in_features % require_divisible or out_features % require_divisible
        ):
            return False
        if exclude_name_tokens:
            name = fqn.lower() if fqn else ""
            if any(tok in name for tok in exclude_name_tokens):
                return False
        if require_bf16:
            import torch
            weight = getattr(module, "weight", None)
            if weight is None or weight.dtype != torch.bfloat16:
                return False
        return True

    return filter_fn


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


# ============================ diffusion_speed._compile_repeated_blocks (trimmed) ============================
def _compile_repeated_blocks(transformer, *, max_autotune=False, cache_active=False, offload_active=False):
    kwargs = {
        "fullgraph": not (cache_active or offload_active),
        "dynamic": not max_autotune,
        "backend": counting_backend,
    }
    dynamo_cfg = getattr(getattr(torch, "_dynamo", None), "config", None)
    if dynamo_cfg is not None:
        for _limit_attr in ("recompile_limit", "cache_size_limit"):  # name varies by torch ver
            if hasattr(dynamo_cfg, _limit_attr):
                setattr(dynamo_cfg, _limit_attr, max(getattr(dynamo_cfg, _limit_attr) or 0, 64))
    transformer.compile_repeated_blocks(**kwargs)
    return True


# ============================ driver: build the rotated checkpoint, load it, denoise ============================
def main():
    torch.manual_seed(0)
    group = 16

    # scripts/build_prequant_checkpoint.py: rotate BEFORE quantize_ (quantisation itself left out)
    builder = MiniMaxH3Transformer3DModel().eval()
    filter_fn = make_filter_fn(16, exclude_name_tokens=_MINIMAX_H3_INT8_EXCLUDES)
    rotatable, not_divisible = rotatable_fqns(builder, filter_fn, group)
    rotate_linears_(builder, rotatable, group)
    state_dict = {k: v.detach().clone() for k, v in builder.state_dict().items()}
    metadata = rotation_metadata(group, rotatable)

    # diffusion_prequant: from_config, load_state_dict(assign=True), then the ONLINE half
    transformer = MiniMaxH3Transformer3DModel().eval()
    transformer.load_state_dict(state_dict, strict=True, assign=True)
    apply_activation_rotation(transformer, metadata)

    _compile_repeated_blocks(transformer)

    # packed sequence: 4 text rows, 8 video rows, 2 audio rows
    n_text, n_video, n_audio = 4, 8, 2
    seq = n_text + n_video + n_audio
    text_indices = torch.arange(0, n_text)
    video_indices = torch.arange(n_text, n_text + n_video)
    audio_indices = torch.arange(n_text + n_video, seq)
    token_tags = torch.cat([torch.ones(n_text), torch.zeros(n_video), torch.full((n_audio,), 2.0)]).long()
    timestep_indices = torch.zeros(seq, dtype=torch.long)
    position_ids = torch.stack([torch.zeros(seq), torch.arange(seq) // 4, torch.arange(seq) % 4], dim=-1).long()
    encoder_hidden_states = torch.randn(1, n_text, 24)
    latents = torch.randn(1, n_video, 16)
    audio = torch.randn(1, n_audio, 4)

    total = 0.0
    with torch.no_grad():
        for t in (1.0, 0.75, 0.5, 0.25):
            v, a = transformer(latents, audio, encoder_hidden_states, torch.tensor([t]), timestep_indices,
                               token_tags, position_ids, video_indices, audio_indices, text_indices)
            latents = latents - 0.25 * v
            audio = audio - 0.25 * a
            total += float(v.sum()) + float(a.sum())
    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {round(total, 4)}")


if __name__ == "__main__":
    main()
