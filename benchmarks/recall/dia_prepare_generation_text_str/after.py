# Reproduction of nari-labs/dia AFTER 5f57172d1c ("Reduce recompilation of `_prepare_generation`
# through more graph break fixes. (#165)"): the prompt is byte-encoded to a tensor by `_encode_text`
# outside the compiled frame, `_prepare_generation` takes `text_tokens: torch.Tensor` (dynamic=True,
# now fullgraph=True), the audio file is loaded outside it and the verbose print is gone.
# (dia/model.py, dia/state.py, dia/layers.py, dia/audio.py, dia/config.py at 5f57172d1c, trimmed.)
from dataclasses import dataclass, field
from enum import Enum

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.nn import RMSNorm

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- dia/config.py (pydantic BaseModel(frozen=True) -> frozen dataclasses) -----------------------
@dataclass(frozen=True)
class DataConfig:
    text_length: int
    audio_length: int
    channels: int = 9
    text_pad_value: int = 0
    audio_eos_value: int = 1024
    audio_pad_value: int = 1025
    audio_bos_value: int = 1026
    delay_pattern: list = field(default_factory=lambda: [0, 8, 9, 10, 11, 12, 13, 14, 15])


@dataclass(frozen=True)
class EncoderConfig:
    n_layer: int
    n_embd: int
    n_hidden: int
    n_head: int
    head_dim: int


@dataclass(frozen=True)
class DecoderConfig:
    n_layer: int
    n_embd: int
    n_hidden: int
    gqa_query_heads: int
    kv_heads: int
    gqa_head_dim: int
    cross_query_heads: int
    cross_head_dim: int


@dataclass(frozen=True)
class ModelConfig:
    encoder: EncoderConfig
    decoder: DecoderConfig
    src_vocab_size: int = 128
    tgt_vocab_size: int = 1028
    dropout: float = 0.0
    normalization_layer_epsilon: float = 1.0e-5
    weight_dtype: str = "float32"
    rope_min_timescale: int = 1
    rope_max_timescale: int = 10_000


@dataclass(frozen=True)
class DiaConfig:
    model: ModelConfig
    data: DataConfig
    version: str = "1.0"


# ---- dia/audio.py --------------------------------------------------------------------------------
def build_delay_indices(B, T, C, delay_pattern):
    delay_arr = torch.tensor(delay_pattern, dtype=torch.int32)

    t_idx_BxT = torch.broadcast_to(
        torch.arange(T, dtype=torch.int32)[None, :],
        [B, T],
    )
    t_idx_BxTx1 = t_idx_BxT[..., None]
    t_idx_BxTxC = t_idx_BxTx1 - delay_arr.view(1, 1, C)

    b_idx_BxTxC = torch.broadcast_to(
        torch.arange(B, dtype=torch.int32).view(B, 1, 1),
        [B, T, C],
    )
    c_idx_BxTxC = torch.broadcast_to(
        torch.arange(C, dtype=torch.int32).view(1, 1, C),
        [B, T, C],
    )

    t_clamped_BxTxC = torch.clamp(t_idx_BxTxC, 0, T - 1)

    indices_BTCx3 = torch.stack(
        [
            b_idx_BxTxC.reshape(-1),
            t_clamped_BxTxC.reshape(-1),
            c_idx_BxTxC.reshape(-1),
        ],
        dim=1,
    ).long()

    return t_idx_BxTxC, indices_BTCx3


def apply_audio_delay(audio_BxTxC, pad_value, bos_value, precomp):
    device = audio_BxTxC.device
    t_idx_BxTxC, indices_BTCx3 = precomp
    t_idx_BxTxC = t_idx_BxTxC.to(device)
    indices_BTCx3 = indices_BTCx3.to(device)

    gathered_flat = audio_BxTxC[indices_BTCx3[:, 0], indices_BTCx3[:, 1], indices_BTCx3[:, 2]]
    gathered_BxTxC = gathered_flat.view(audio_BxTxC.shape)

    mask_bos = t_idx_BxTxC < 0
    mask_pad = t_idx_BxTxC >= audio_BxTxC.shape[1]

    bos_tensor = torch.tensor(bos_value, dtype=audio_BxTxC.dtype, device=device)
    pad_tensor = torch.tensor(pad_value, dtype=audio_BxTxC.dtype, device=device)

    result_BxTxC = torch.where(mask_bos, bos_tensor, torch.where(mask_pad, pad_tensor, gathered_BxTxC))

    return result_BxTxC


# ---- dia/state.py --------------------------------------------------------------------------------
def create_attn_mask(q_padding_mask_1d, k_padding_mask_1d, device, is_causal=False):
    B1, Tq = q_padding_mask_1d.shape
    B2, Tk = k_padding_mask_1d.shape
    assert B1 == B2, "Query and key batch dimensions must match"

    p_mask_q = q_padding_mask_1d.unsqueeze(2)
    p_mask_k = k_padding_mask_1d.unsqueeze(1)
    non_pad_attends_non_pad = p_mask_q & p_mask_k
    pad_attends_pad = (~p_mask_q) & (~p_mask_k)
    mask = non_pad_attends_non_pad | pad_attends_pad

    if is_causal:
        assert Tq == Tk, "Causal mask requires query and key sequence lengths to be equal"
        causal_mask_2d = torch.tril(torch.ones((Tq, Tk), dtype=torch.bool, device=device))
        causal_mask = mask & causal_mask_2d
        return causal_mask.unsqueeze(1)
    else:
        return mask.unsqueeze(1)


@dataclass
class EncoderInferenceState:
    max_seq_len: int
    device: torch.device
    positions: torch.Tensor
    padding_mask: torch.Tensor
    attn_mask: torch.Tensor

    @classmethod
    def new(cls, config: DiaConfig, cond_src: torch.Tensor) -> "EncoderInferenceState":
        device = cond_src.device

        positions = (
            torch.arange(config.data.text_length, dtype=torch.float32, device=device).unsqueeze(0).expand(2, -1)
        )
        padding_mask = (cond_src != config.data.text_pad_value).to(device).expand(2, -1)

        attn_mask = create_attn_mask(padding_mask, padding_mask, device, is_causal=False)

        return cls(
            max_seq_len=config.data.text_length,
            device=device,
            positions=positions,
            padding_mask=padding_mask,
            attn_mask=attn_mask,
        )


class KVCache(torch.nn.Module):
    def __init__(self, num_heads, max_len, head_dim, dtype, device, k=None, v=None):
        k = torch.zeros((2, num_heads, max_len, head_dim), dtype=dtype, device=device) if k is None else k
        v = torch.zeros((2, num_heads, max_len, head_dim), dtype=dtype, device=device) if v is None else v

        super().__init__()
        self.register_buffer("k", k)
        self.register_buffer("v", v)

    @classmethod
    def from_kv(cls, k: torch.Tensor, v: torch.Tensor) -> "KVCache":
        return cls(
            num_heads=k.shape[1],
            max_len=k.shape[2],
            head_dim=k.shape[3],
            dtype=k.dtype,
            device=k.device,
            k=k,
            v=v,
        )

    def update(self, k: torch.Tensor, v: torch.Tensor, current_idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k_out, v_out = self.k, self.v
        k_out[:, :, current_idx, :] = k
        v_out[:, :, current_idx, :] = v
        return self.k, self.v

    def prefill(self, k: torch.Tensor, v: torch.Tensor):
        prefill_len = k.shape[2]
        self.k[:, :, :prefill_len, :] = k
        self.v[:, :, :prefill_len, :] = v
        self.current_idx = prefill_len - 1


@dataclass
class DecoderInferenceState:
    device: torch.device
    dtype: torch.dtype
    enc_out: torch.Tensor
    enc_positions: torch.Tensor
    dec_positions: torch.Tensor
    self_attn_cache: list
    cross_attn_cache: list
    casual_attn_mask: torch.Tensor

    @classmethod
    def new(cls, config, enc_state, enc_out, dec_cross_attn_cache, compute_dtype) -> "DecoderInferenceState":
        device = enc_out.device
        max_audio_len = config.data.audio_length

        dec_positions = torch.full((2, 1), fill_value=0, dtype=torch.int32, device=device)
        causal_mask = torch.tril(torch.ones(max_audio_len, max_audio_len, dtype=torch.bool, device=device))

        self_attn_cache = [
            KVCache(
                config.model.decoder.kv_heads,
                max_audio_len,
                config.model.decoder.gqa_head_dim,
                compute_dtype,
                device,
            )
            for _ in range(config.model.decoder.n_layer)
        ]

        return cls(
            device=device,
            dtype=compute_dtype,
            enc_out=enc_out,
            enc_positions=enc_state.positions,
            dec_positions=dec_positions,
            self_attn_cache=self_attn_cache,
            cross_attn_cache=dec_cross_attn_cache,
            casual_attn_mask=causal_mask,
        )

    def prepare_step(self, step_from: int, step_to: int | None = None) -> None:
        if step_to is None:
            step_to = step_from + 1
        self.dec_positions = (
            torch.arange(step_from, step_to, dtype=torch.int32, device=self.device).unsqueeze(0).expand(2, -1)
        )


@dataclass
class DecoderOutput:
    generated_tokens: torch.Tensor
    prefill_step: int

    @classmethod
    def new(cls, config: DiaConfig, device: torch.device) -> "DecoderOutput":
        max_audio_len = config.data.audio_length
        return cls(
            generated_tokens=torch.full(
                (max_audio_len, config.data.channels),
                fill_value=-1,
                dtype=torch.int,
                device=device,
            ),
            prefill_step=0,
        )

    def get_tokens_at(self, step_from: int, step_to: int | None = None) -> torch.Tensor:
        if step_to is None:
            step_to = step_from + 1
        return self.generated_tokens[step_from:step_to, :]

    def prefill(self, dec_out: torch.Tensor, prefill_step: int):
        length = dec_out.shape[0]
        self.generated_tokens[0:length, :] = dec_out
        self.prefill_step = prefill_step


# ---- dia/layers.py -------------------------------------------------------------------------------
def _normalize_axes(axes, ndim):
    return tuple(ax if ax >= 0 else ndim + ax for ax in axes)


class DenseGeneral(nn.Module):
    def __init__(self, in_shapes, out_features, axis=(-1,), weight_dtype=None, device=None):
        super().__init__()
        self.in_shapes = in_shapes
        self.out_features = out_features
        self.axis = axis
        self.kernel_shape = self.in_shapes + self.out_features

        factory_kwargs = {"device": device, "dtype": weight_dtype}
        self.weight = nn.Parameter(torch.empty(self.kernel_shape, **factory_kwargs))

    def forward(self, inputs: Tensor) -> Tensor:
        norm_axis = _normalize_axes(self.axis, inputs.ndim)
        kernel_contract_axes = tuple(range(len(norm_axis)))

        output = torch.tensordot(
            inputs.to(self.weight.dtype),
            self.weight,
            dims=(norm_axis, kernel_contract_axes),
        ).to(inputs.dtype)
        return output


class MlpBlock(nn.Module):
    def __init__(self, embed_dim, intermediate_dim, compute_dtype):
        super().__init__()
        self.dtype = compute_dtype
        self.wi_fused = DenseGeneral(in_shapes=(embed_dim,), out_features=(2, intermediate_dim), axis=(-1,),
                                     weight_dtype=compute_dtype)
        self.wo = DenseGeneral(in_shapes=(intermediate_dim,), out_features=(embed_dim,), axis=(-1,),
                               weight_dtype=compute_dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fused_x = self.wi_fused(x)
        gate = fused_x[..., 0, :]
        up = fused_x[..., 1, :]
        hidden = torch.mul(F.silu(gate), up).to(self.dtype)
        output = self.wo(hidden)
        return output


class RotaryEmbedding(nn.Module):
    def __init__(self, embedding_dims, min_timescale=1, max_timescale=10000, dtype=torch.float32):
        super().__init__()
        if embedding_dims % 2 != 0:
            raise ValueError("Embedding dim must be even for RoPE.")
        self.embedding_dims = embedding_dims
        self.min_timescale = min_timescale
        self.max_timescale = max_timescale
        self.compute_dtype = dtype

        half_embedding_dim = embedding_dims // 2
        fraction = (2.0 * torch.arange(0, half_embedding_dim)) / embedding_dims
        timescale = (self.min_timescale * (self.max_timescale / self.min_timescale) ** fraction).to(torch.float32)
        self.register_buffer("timescale", timescale, persistent=False)

    def forward(self, inputs: torch.Tensor, position: torch.Tensor):
        position = position.unsqueeze(-1).unsqueeze(-1)
        sinusoid_inp = position / self.timescale
        sin = torch.sin(sinusoid_inp)
        cos = torch.cos(sinusoid_inp)
        first_half, second_half = torch.chunk(inputs.to(torch.float32), 2, dim=-1)
        first_part = first_half * cos - second_half * sin
        second_part = second_half * cos + first_half * sin
        return torch.cat((first_part.to(self.compute_dtype), second_part.to(self.compute_dtype)), dim=-1)


class Attention(nn.Module):
    def __init__(self, config, q_embed_dim, kv_embed_dim, num_query_heads, num_kv_heads, head_dim, compute_dtype,
                 is_cross_attn=False, out_embed_dim=None):
        super().__init__()
        self.num_query_heads = num_query_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.is_cross_attn = is_cross_attn
        self.output_dim = out_embed_dim if out_embed_dim is not None else q_embed_dim
        self.projected_query_dim = num_query_heads * head_dim
        if num_query_heads % num_kv_heads != 0:
            raise ValueError(f"num_query_heads ({num_query_heads}) must be divisible by num_kv_heads ({num_kv_heads})")
        self.num_gqa_groups = num_query_heads // num_kv_heads

        self.q_proj = DenseGeneral(in_shapes=(q_embed_dim,), out_features=(num_query_heads, head_dim), axis=(-1,),
                                   weight_dtype=compute_dtype)
        self.k_proj = DenseGeneral(in_shapes=(kv_embed_dim,), out_features=(num_kv_heads, head_dim), axis=(-1,),
                                   weight_dtype=compute_dtype)
        self.v_proj = DenseGeneral(in_shapes=(kv_embed_dim,), out_features=(num_kv_heads, head_dim), axis=(-1,),
                                   weight_dtype=compute_dtype)
        self.o_proj = DenseGeneral(in_shapes=(num_query_heads, head_dim), out_features=(self.output_dim,),
                                   axis=(-2, -1), weight_dtype=compute_dtype)

        self.rotary_emb = RotaryEmbedding(
            embedding_dims=self.head_dim,
            min_timescale=config.model.rope_min_timescale,
            max_timescale=config.model.rope_max_timescale,
            dtype=compute_dtype,
        )

    def forward(self, Xq, Xkv, q_positions, kv_positions=None, attn_mask=None, cache=None, prefill=False,
                is_causal=False, current_idx=None):
        if kv_positions is None:
            kv_positions = q_positions
        original_dtype = Xq.dtype

        Xq_BxTxNxH = self.q_proj(Xq)
        Xq_BxTxNxH = self.rotary_emb(Xq_BxTxNxH, position=q_positions)
        Xq_BxNxTxH = Xq_BxTxNxH.transpose(1, 2)

        attn_k = None
        attn_v = None

        if self.is_cross_attn:
            attn_k, attn_v = cache.k, cache.v
        else:
            Xk_BxSxKxH = self.k_proj(Xkv)
            Xv_BxSxKxH = self.v_proj(Xkv)
            Xk_BxSxKxH = self.rotary_emb(Xk_BxSxKxH, position=kv_positions)

            Xk_BxKxSxH = Xk_BxSxKxH.transpose(1, 2)
            Xv_BxKxSxH = Xv_BxSxKxH.transpose(1, 2)

            if cache is None:
                attn_k = Xk_BxKxSxH
                attn_v = Xv_BxKxSxH
            elif prefill:
                attn_k, attn_v = Xk_BxKxSxH, Xv_BxKxSxH
                cache.prefill(attn_k, attn_v)
            else:
                attn_k, attn_v = cache.update(Xk_BxKxSxH, Xv_BxKxSxH, current_idx)

        attn_output = F.scaled_dot_product_attention(
            Xq_BxNxTxH,
            attn_k,
            attn_v,
            attn_mask=attn_mask if not is_causal else None,
            scale=1.0,
            enable_gqa=self.num_gqa_groups > 1,
            is_causal=is_causal,
        )

        attn_output = attn_output.transpose(1, 2).contiguous()
        output = self.o_proj(attn_output)

        return output.to(original_dtype)


class EncoderLayer(nn.Module):
    def __init__(self, config: DiaConfig, compute_dtype: torch.dtype):
        super().__init__()
        self.config = config
        model_config = config.model
        enc_config = config.model.encoder
        embed_dim = enc_config.n_embd
        self.compute_dtype = compute_dtype

        self.pre_sa_norm = RMSNorm(embed_dim, eps=model_config.normalization_layer_epsilon, dtype=torch.float32)
        self.self_attention = Attention(
            config,
            q_embed_dim=embed_dim,
            kv_embed_dim=embed_dim,
            num_query_heads=enc_config.n_head,
            num_kv_heads=enc_config.n_head,
            head_dim=enc_config.head_dim,
            compute_dtype=compute_dtype,
            is_cross_attn=False,
            out_embed_dim=embed_dim,
        )
        self.post_sa_norm = RMSNorm(embed_dim, eps=model_config.normalization_layer_epsilon, dtype=torch.float32)
        self.mlp = MlpBlock(embed_dim=embed_dim, intermediate_dim=enc_config.n_hidden, compute_dtype=compute_dtype)

    def forward(self, x: torch.Tensor, state: EncoderInferenceState) -> torch.Tensor:
        residual = x
        x_norm = self.pre_sa_norm(x).to(self.compute_dtype)

        sa_out = self.self_attention(
            Xq=x_norm,
            Xkv=x_norm,
            q_positions=state.positions,
            kv_positions=state.positions,
            attn_mask=state.attn_mask,
        )
        x = residual + sa_out

        residual = x
        x_norm = self.post_sa_norm(x).to(self.compute_dtype)
        mlp_out = self.mlp(x_norm)
        x = residual + mlp_out

        return x


class Encoder(nn.Module):
    def __init__(self, config: DiaConfig, compute_dtype: torch.dtype):
        super().__init__()
        self.config = config
        model_config = config.model
        enc_config = config.model.encoder
        self.compute_dtype = compute_dtype

        self.embedding = nn.Embedding(model_config.src_vocab_size, enc_config.n_embd, dtype=compute_dtype)
        self.layers = nn.ModuleList([EncoderLayer(config, compute_dtype) for _ in range(enc_config.n_layer)])
        self.norm = RMSNorm(enc_config.n_embd, eps=model_config.normalization_layer_epsilon, dtype=torch.float32)

    def forward(self, x_ids: torch.Tensor, state: EncoderInferenceState) -> torch.Tensor:
        x = self.embedding(x_ids)

        for layer in self.layers:
            x = layer(x, state)

        x = self.norm(x).to(self.compute_dtype)
        return x


class DecoderLayer(nn.Module):
    def __init__(self, config: DiaConfig, compute_dtype: torch.dtype):
        super().__init__()
        self.config = config
        model_config = config.model
        dec_config = config.model.decoder
        enc_config = config.model.encoder
        dec_embed_dim = dec_config.n_embd
        enc_embed_dim = enc_config.n_embd
        self.compute_dtype = compute_dtype

        self.pre_sa_norm = RMSNorm(dec_embed_dim, eps=model_config.normalization_layer_epsilon, dtype=torch.float32)
        self.pre_ca_norm = RMSNorm(dec_embed_dim, eps=model_config.normalization_layer_epsilon, dtype=torch.float32)
        self.pre_mlp_norm = RMSNorm(dec_embed_dim, eps=model_config.normalization_layer_epsilon, dtype=torch.float32)

        self.self_attention = Attention(
            config,
            q_embed_dim=dec_embed_dim,
            kv_embed_dim=dec_embed_dim,
            num_query_heads=dec_config.gqa_query_heads,
            num_kv_heads=dec_config.kv_heads,
            head_dim=dec_config.gqa_head_dim,
            compute_dtype=compute_dtype,
            is_cross_attn=False,
            out_embed_dim=dec_embed_dim,
        )
        self.cross_attention = Attention(
            config=config,
            q_embed_dim=dec_embed_dim,
            kv_embed_dim=enc_embed_dim,
            num_query_heads=dec_config.cross_query_heads,
            num_kv_heads=dec_config.cross_query_heads,
            head_dim=dec_config.cross_head_dim,
            compute_dtype=compute_dtype,
            is_cross_attn=True,
            out_embed_dim=dec_embed_dim,
        )
        self.mlp = MlpBlock(embed_dim=dec_embed_dim, intermediate_dim=dec_config.n_hidden, compute_dtype=compute_dtype)

    def forward(self, x, state, self_attn_cache=None, cross_attn_cache=None, prefill=False, current_idx=0):
        residual = x
        x_norm = self.pre_sa_norm(x).to(self.compute_dtype)

        self_attn_mask = state.casual_attn_mask[None, None, current_idx]

        sa_out = self.self_attention(
            Xq=x_norm,
            Xkv=x_norm,
            q_positions=state.dec_positions,
            kv_positions=state.dec_positions,
            attn_mask=self_attn_mask,
            cache=self_attn_cache,
            prefill=prefill,
            is_causal=prefill,
            current_idx=current_idx,
        )

        x = residual + sa_out

        residual = x
        x_norm = self.pre_ca_norm(x).to(self.compute_dtype)
        ca_out = self.cross_attention(
            Xq=x_norm,
            Xkv=state.enc_out,
            q_positions=state.dec_positions,
            kv_positions=state.enc_positions,
            cache=cross_attn_cache,
            current_idx=current_idx,
        )
        x = residual + ca_out

        residual = x
        x_norm = self.pre_mlp_norm(x).to(self.compute_dtype)
        mlp_out = self.mlp(x_norm)
        x = residual + mlp_out

        return x


class Decoder(nn.Module):
    def __init__(self, config: DiaConfig, compute_dtype: torch.dtype):
        super().__init__()
        self.config = config
        model_config = config.model
        dec_config = config.model.decoder
        data_config = config.data
        self.num_channels = data_config.channels
        self.num_layers = dec_config.n_layer

        self.embeddings = nn.ModuleList(
            [
                nn.Embedding(model_config.tgt_vocab_size, dec_config.n_embd, dtype=compute_dtype)
                for _ in range(self.num_channels)
            ]
        )
        self.layers = nn.ModuleList(
            [DecoderLayer(config=config, compute_dtype=compute_dtype) for _ in range(self.num_layers)]
        )
        self.norm = RMSNorm(dec_config.n_embd, eps=model_config.normalization_layer_epsilon, dtype=torch.float32)
        self.logits_dense = DenseGeneral(
            in_shapes=(dec_config.n_embd,),
            out_features=(self.num_channels, model_config.tgt_vocab_size),
            axis=(-1,),
            weight_dtype=compute_dtype,
        )

    def precompute_cross_attn_cache(self, enc_out, enc_positions, k_padding_mask=None):
        per_layer_kv_cache = []

        for layer in self.layers:
            cross_attn_module = layer.cross_attention
            k_proj = cross_attn_module.k_proj(enc_out)
            v_proj = cross_attn_module.v_proj(enc_out)

            k_proj = cross_attn_module.rotary_emb(k_proj, position=enc_positions)
            k = k_proj.transpose(1, 2)
            v = v_proj.transpose(1, 2)
            if k_padding_mask is not None:
                k = k.masked_fill(~k_padding_mask.unsqueeze(1).unsqueeze(3), 0.0)

            per_layer_kv_cache.append(KVCache.from_kv(k, v))

        return per_layer_kv_cache

    def forward(self, tgt_ids_BxTxC: torch.Tensor, state: DecoderInferenceState) -> torch.Tensor:
        _, _, num_channels_in = tgt_ids_BxTxC.shape
        assert num_channels_in == self.num_channels, "Input channels mismatch"

        x = None
        for i in range(self.num_channels):
            channel_tokens = tgt_ids_BxTxC[..., i]
            channel_embed = self.embeddings[i](channel_tokens)
            x = channel_embed if x is None else x + channel_embed

        for i, layer in enumerate(self.layers):
            self_cache = state.self_attn_cache[i]
            cross_cache = state.cross_attn_cache[i]
            x = layer(x, state, self_attn_cache=self_cache, cross_attn_cache=cross_cache, prefill=True)

        x = self.norm(x)
        logits_BxTxCxV = self.logits_dense(x)

        return logits_BxTxCxV.to(torch.float32)


class DiaModel(nn.Module):  # (PyTorchModelHubMixin dropped)
    def __init__(self, config: DiaConfig, compute_dtype: torch.dtype):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config, compute_dtype)
        self.decoder = Decoder(config, compute_dtype)


# ---- dia/model.py --------------------------------------------------------------------------------
class ComputeDtype(str, Enum):
    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"

    def to_dtype(self) -> torch.dtype:
        if self == ComputeDtype.FLOAT32:
            return torch.float32
        elif self == ComputeDtype.FLOAT16:
            return torch.float16
        elif self == ComputeDtype.BFLOAT16:
            return torch.bfloat16
        else:
            raise ValueError(f"Unsupported compute dtype: {self}")


class Dia:
    def __init__(self, config: DiaConfig, compute_dtype=ComputeDtype.FLOAT32, device=None):
        super().__init__()
        self.config = config
        self.device = device if device is not None else torch.device("cpu")
        if isinstance(compute_dtype, str):
            compute_dtype = ComputeDtype(compute_dtype)
        self.compute_dtype = compute_dtype.to_dtype()
        self.model: DiaModel = DiaModel(config, self.compute_dtype)
        self.dac_model = None

    def _encode_text(self, text: str) -> torch.Tensor:
        """Encodes the input text into a tensor of token IDs."""
        max_len = self.config.data.text_length

        byte_text = text.encode("utf-8")
        replaced_bytes = byte_text.replace(b"[S1]", b"\x01").replace(b"[S2]", b"\x02")
        text_tokens = list(replaced_bytes)
        return torch.tensor(
            text_tokens[:max_len],
            dtype=torch.long,
            device=self.device,
        )

    def _pad_text_input(self, text_tokens: torch.Tensor) -> torch.Tensor:
        """Pads the text input to the maximum length."""
        text_pad_value = self.config.data.text_pad_value
        max_len = self.config.data.text_length

        current_len = len(text_tokens)
        src_tokens = torch.full(
            (1, max_len),
            fill_value=text_pad_value,
            dtype=torch.long,
            device=self.device,
        )
        src_tokens[0, :current_len] = text_tokens
        return src_tokens

    def _prepare_audio_prompt(self, audio_prompt: torch.Tensor | None) -> tuple[torch.Tensor, int]:
        num_channels = self.config.data.channels
        audio_bos_value = self.config.data.audio_bos_value
        audio_pad_value = self.config.data.audio_pad_value
        delay_pattern = self.config.data.delay_pattern
        max_delay_pattern = max(delay_pattern)

        parts = [
            torch.full(
                (1, num_channels),
                fill_value=audio_bos_value,
                dtype=torch.int,
                device=self.device,
            )
        ]

        prefill_step = 1

        if audio_prompt is not None:
            prefill_step += audio_prompt.shape[0]
            parts.append(audio_prompt)

        delay_pad_tensor = torch.full(
            (max_delay_pattern, num_channels), fill_value=-1, dtype=torch.int, device=self.device
        )
        parts.append(delay_pad_tensor)
        prefill = torch.cat(parts, dim=0)

        delay_precomp = build_delay_indices(
            B=1,
            T=prefill.shape[0],
            C=num_channels,
            delay_pattern=delay_pattern,
        )

        prefill = apply_audio_delay(
            audio_BxTxC=prefill.unsqueeze(0),
            pad_value=audio_pad_value,
            bos_value=audio_bos_value,
            precomp=delay_precomp,
        ).squeeze(0)

        return prefill, prefill_step

    def _prepare_generation(self, text_tokens: torch.Tensor, audio_prompt: torch.Tensor | None):
        enc_input_cond = self._pad_text_input(text_tokens)
        enc_input_uncond = torch.zeros_like(enc_input_cond)
        enc_input = torch.cat([enc_input_uncond, enc_input_cond], dim=0)

        enc_state = EncoderInferenceState.new(self.config, enc_input_cond)
        encoder_out = self.model.encoder(enc_input, enc_state)

        dec_cross_attn_cache = self.model.decoder.precompute_cross_attn_cache(
            encoder_out, enc_state.positions, enc_state.padding_mask
        )
        dec_state = DecoderInferenceState.new(
            self.config, enc_state, encoder_out, dec_cross_attn_cache, self.compute_dtype
        )
        dec_output = DecoderOutput.new(self.config, self.device)
        prefill, prefill_step = self._prepare_audio_prompt(audio_prompt)
        dec_output.prefill(prefill, prefill_step)

        dec_step = prefill_step - 1
        if dec_step > 0:
            dec_state.prepare_step(0, dec_step)
            tokens_BxTxC = dec_output.get_tokens_at(0, dec_step).unsqueeze(0).expand(2, -1, -1)
            self.model.decoder.forward(tokens_BxTxC, dec_state)

        return dec_state, dec_output

    def load_audio(self, audio_path: str) -> torch.Tensor:
        import torchaudio  # (module-level import in dia; only reached with an audio prompt path)

        audio, sr = torchaudio.load(audio_path, channels_first=True)  # C, T
        if sr != 44100:
            audio = torchaudio.functional.resample(audio, sr, 44100)
        audio = audio.to(self.device).unsqueeze(0)  # 1, C, T
        audio_data = self.dac_model.preprocess(audio, 44100)
        _, encoded_frame, _, _, _ = self.dac_model.encode(audio_data)  # 1, C, T
        return encoded_frame.squeeze(0).transpose(0, 1)

    @torch.inference_mode()
    def generate(self, text: str, use_torch_compile: bool = False, audio_prompt=None, verbose: bool = False):
        self.model.eval()

        if use_torch_compile and not hasattr(self, "_compiled"):
            # Compilation can take about a minute.
            self._prepare_generation = torch.compile(self._prepare_generation, dynamic=True, fullgraph=True,
                                                     backend=counting_backend)
            self._compiled = True

        if isinstance(audio_prompt, str):
            audio_prompt = self.load_audio(audio_prompt)
        dec_state, dec_output = self._prepare_generation(self._encode_text(text), audio_prompt)
        dec_step = dec_output.prefill_step - 1
        # ... autoregressive decode loop (compiled self._decoder_step) and DAC decoding trimmed ...
        return dec_state, dec_output


# ---- example/benchmark.py driver (the 4 test prompts; warm-up + benchmark rounds) ---------------
torch.manual_seed(0)
config = DiaConfig(
    model=ModelConfig(
        encoder=EncoderConfig(n_layer=2, n_embd=32, n_hidden=64, n_head=2, head_dim=16),
        decoder=DecoderConfig(n_layer=2, n_embd=32, n_hidden=64, gqa_query_heads=4, kv_heads=2, gqa_head_dim=16,
                              cross_query_heads=2, cross_head_dim=16),
    ),
    data=DataConfig(text_length=256, audio_length=128),
)
model = Dia(config, compute_dtype="float32", device=torch.device("cpu"))
with torch.no_grad():  # stand-in for loading the checkpoint (DenseGeneral weights are torch.empty)
    for p in model.model.parameters():
        p.normal_(0.0, 0.2)

test_cases = [
    "[S1] Dia is an open weights text to dialogue model.",
    "[S1] Dia is an open weights text to dialogue model. [S2] You get full control over scripts and voices. [S1] Wow. Amazing. (laughs) [S2] Try it now on Git hub or Hugging Face.",
    "[S1] torch.compile is a new feature in PyTorch that allows you to compile your model with a single line of code.",
    "[S1] torch.compile is a new feature in PyTorch that allows you to compile your model with a single line of code. [S2] It is a new feature in PyTorch that allows you to compile your model with a single line of code.",
]

checksum = 0.0
for _ in range(2):
    for text in test_cases:
        dec_state, dec_output = model.generate(text, use_torch_compile=True)
        checksum += dec_state.enc_out.double().sum().item()
        checksum += sum(c.k.double().abs().sum().item() + c.v.double().sum().item() for c in dec_state.cross_attn_cache)
        checksum += dec_output.generated_tokens.double().sum().item() * 1e-3
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
