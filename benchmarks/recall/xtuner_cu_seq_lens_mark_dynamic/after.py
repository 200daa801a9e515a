"""xtuner ea57efb8 (PR #1422): `Dense.forward` marks `seq_ctx.cu_seq_lens_q` /
`cu_seq_lens_k` dynamic (`BaseModel._mark_dynamic`) before the layer loop, so the
compiled `DenseDecoderLayer.forward` is traced with a symbolic document count
from the first batch on (xtuner/v1/model/base.py, xtuner/v1/model/dense/dense.py).

Trimmed CPU reproduction: the flash-attn varlen CUDA kernel is stood in by a CPU
`torch.library.custom_op` (per-document causal SDPA) with the same fake impl,
FSDP / float8 / sequence parallel / the loss context are dropped.
"""
import pydoc
from typing import Callable, NotRequired, Optional, Tuple, TypedDict, cast

import torch
import torch.nn.functional as F
from torch import nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# --- xtuner/v1/data_proto/sequence_context.py (trimmed) -----------------------
class SequenceContext:
    input_ids: torch.LongTensor | None  # shape (1, seq_len)
    cu_seq_lens_q: torch.IntTensor
    cu_seq_lens_k: torch.IntTensor
    max_length_q: torch.Tensor
    max_length_k: torch.Tensor
    num_padding: int
    position_ids: torch.LongTensor | None

    def __init__(self, input_ids, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k, num_padding=0,
                 device="cpu", position_ids=None):
        self.input_ids = input_ids
        self.cu_seq_lens_q = cu_seq_lens_q
        self.cu_seq_lens_k = cu_seq_lens_k
        # force max_length_q and max_length_k be cpu tensors to avoid cuda synchronization
        # max_length_q and max_length_k should be unpacked to int in attention implementation
        if isinstance(max_length_q, int):
            self.max_length_q = torch.tensor(max_length_q, device="cpu")
        else:
            self.max_length_q = max_length_q
        if isinstance(max_length_k, int):
            self.max_length_k = torch.tensor(max_length_k, device="cpu")
        else:
            self.max_length_k = max_length_k
        self.num_padding = num_padding
        self.device = device
        self.sequence_parallel_mesh = None

        seq_lens_k = self.cu_seq_lens_k[1:] - self.cu_seq_lens_k[:-1]
        seq_lens_q = self.cu_seq_lens_q[1:] - self.cu_seq_lens_q[:-1]

        if position_ids is None:
            _position_ids = [torch.arange(k - q, k) for q, k in zip(seq_lens_q, seq_lens_k)]
            position_ids = torch.cat(_position_ids).unsqueeze(0).to(self.cu_seq_lens_k.device)
        self.position_ids = position_ids

    @classmethod
    def from_input_ids(cls, input_ids, device="cpu"):
        for ids in input_ids:
            assert ids.shape[0] == 1, "input_ids must have batch size of 1"
        num_tokens = [x.numel() for x in input_ids]

        cu_seq_lens = cast(torch.IntTensor, torch.cumsum(torch.LongTensor([0] + num_tokens), dim=0).to(device).int())
        return cls(
            input_ids=cast(torch.LongTensor, torch.cat(input_ids, dim=1).to(device)),
            cu_seq_lens_k=cu_seq_lens,
            cu_seq_lens_q=cu_seq_lens,
            max_length_q=cast(int, (cu_seq_lens[1:] - cu_seq_lens[:-1]).max().item()),
            max_length_k=cast(int, (cu_seq_lens[1:] - cu_seq_lens[:-1]).max().item()),
            device=device,
        )


# --- xtuner/v1/ops/flash_attn/gpu.py, flash-attn 2 path (CPU stand-in kernel) ---
@torch.library.custom_op("flash_attn::_flash_attn_varlen_forward_v2", mutates_args=(), device_types="cpu")
def _flash_attn_varlen_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: torch.Tensor,
    max_seqlen_k: torch.Tensor,
    dropout_p: float,
    softmax_scale: float,
    causal: bool,
    window_size_left: int = -1,
    window_size_right: int = -1,
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    return_softmax: bool = False,
    block_table: Optional[torch.Tensor] = None,
    leftpad_k: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None,
    zero_tensors: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    # CPU stand-in for flash_attn_gpu.varlen_fwd: causal attention inside each packed document
    out = torch.empty_like(q)
    softmax_lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    bounds = cu_seqlens_q.tolist()
    for s, e in zip(bounds[:-1], bounds[1:]):
        qs, ks, vs = (x[s:e].transpose(0, 1) for x in (q, k, v))  # [head, len, dim]
        scores = (qs @ ks.transpose(-1, -2)) * softmax_scale
        if causal:
            mask = torch.ones(e - s, e - s, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        softmax_lse[:, s:e] = torch.logsumexp(scores.float(), dim=-1)
        out[s:e] = (scores.softmax(-1) @ vs).transpose(0, 1)
    p = torch.empty((0,), dtype=q.dtype)
    rng_state = torch.empty((2,), dtype=torch.int64)
    return out, softmax_lse, p, rng_state


@torch.library.register_fake("flash_attn::_flash_attn_varlen_forward_v2")
def _flash_attn_varlen_forward_fake(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float,
    softmax_scale: float,
    causal: bool,
    window_size_left: int = -1,
    window_size_right: int = -1,
    softcap: float = 0.0,
    alibi_slopes: Optional[torch.Tensor] = None,
    return_softmax: bool = False,
    block_table: Optional[torch.Tensor] = None,
    leftpad_k: Optional[torch.Tensor] = None,
    seqused_k: Optional[torch.Tensor] = None,
    zero_tensors: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    total_q, num_heads, _ = q.shape
    out = torch.empty_like(q)
    softmax_lse = torch.empty((num_heads, total_q), dtype=torch.float32, device=q.device, layout=q.layout)
    p = torch.empty((0,), dtype=q.dtype, device=q.device, layout=q.layout)
    rng_state = torch.empty((2,), dtype=torch.int64, device=q.device)
    return out, softmax_lse, p, rng_state


class FlashAttnVarlenFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
                causal, window_size, softcap, alibi_slopes, deterministic, return_softmax, block_table,
                is_grad_enabled):
        if softmax_scale is None:
            softmax_scale = q.shape[-1] ** (-0.5)
        out_padded, softmax_lse, S_dmask, rng_state = _flash_attn_varlen_forward(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
            causal=causal, window_size_left=window_size[0], window_size_right=window_size[1], softcap=softcap,
            alibi_slopes=alibi_slopes, return_softmax=return_softmax and dropout_p > 0, block_table=block_table,
        )
        out = out_padded
        return out if not return_softmax else (out, softmax_lse, S_dmask)


def flash_attn_varlen_func_v2(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                              softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                              alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None):
    return FlashAttnVarlenFunc.apply(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal,
        window_size, softcap, alibi_slopes, deterministic, return_attn_probs, block_table, torch.is_grad_enabled(),
    )


flash_attn_varlen_func = flash_attn_varlen_func_v2


# --- xtuner/v1/ops/attn_imp.py ---------------------------------------------------
def flash_attention(q, k, v, window_size=(-1, -1), s_aux=None, **kwargs):
    # q, k, v: [b, n_head, seq , head_dim]
    assert q.size(0) == 1, "Only support batch size 1 for flash attention"
    q = q.transpose(1, 2).squeeze(0)  # [seq, head, dim]
    k = k.transpose(1, 2).squeeze(0)
    v = v.transpose(1, 2).squeeze(0)

    fla_outputs = flash_attn_varlen_func(q, k, v, return_attn_probs=True, **kwargs)
    raw_output = fla_outputs[0]
    softmax_lse = fla_outputs[1].detach()
    return {"raw_output": raw_output[None], "softmax_lse": softmax_lse}


attn_impl_mapping = {"flash_attention": flash_attention}


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


# --- xtuner/v1/module ------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class MultiHeadAttention(nn.Module):
    def __init__(self, *, head_dim, hidden_size, num_attention_heads, num_key_value_heads, dropout=0.0,
                 attn_impl="flash_attention", layer_idx=0):
        super().__init__()
        self.name = f"layers.{layer_idx}.self_attn"
        self.head_dim = head_dim
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.dropout = dropout
        self.layer_idx = layer_idx
        self.q_proj = nn.Linear(hidden_size, num_attention_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(num_attention_heads * head_dim, hidden_size, bias=False)
        self.window_size = (-1, -1)
        self.apply_rotary_emb = apply_rotary_pos_emb
        self.attn_impl_func: Callable = attn_impl_mapping[attn_impl]

    def forward(self, hidden_states, position_embeddings, seq_ctx: SequenceContext):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)

        query_states = self.q_proj(hidden_states).view(hidden_shape)  # [b, seq,  n_head, head_dim]
        key_states = self.k_proj(hidden_states).view(hidden_shape)
        value_states = self.v_proj(hidden_states).view(hidden_shape)

        query_states = query_states.transpose(1, 2)  # [b, n_head, seq , head_dim]
        key_states = key_states.transpose(1, 2)
        value_states = value_states.transpose(1, 2)

        cos, sin = position_embeddings
        query_states, key_states = self.apply_rotary_emb(query_states, key_states, cos, sin)

        assert query_states.size(0) == 1
        # [b, n_head, seq, head_dim]
        attn_op_outputs = self.attn_impl_func(
            query_states,
            key_states,
            value_states,
            cu_seqlens_q=seq_ctx.cu_seq_lens_q,
            cu_seqlens_k=seq_ctx.cu_seq_lens_k,
            max_seqlen_q=seq_ctx.max_length_q,
            max_seqlen_k=seq_ctx.max_length_k,
            window_size=self.window_size,
            dropout_p=self.dropout,
            softmax_scale=self.scaling,
            causal=True,
            deterministic=False,
        )
        raw_output = attn_op_outputs["raw_output"]
        raw_output = raw_output.reshape(*input_shape, -1).contiguous()
        projected_output = self.o_proj(raw_output)
        return {"projected_output": projected_output, **attn_op_outputs}


class DenseMLP(nn.Module):
    def __init__(self, *, hidden_size, intermediate_size, bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)
        self.act_fn = F.silu

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


# --- xtuner/v1/module/decoder_layer/dense_decoder_layer.py ---------------------
class DenseDecoderLayer(nn.Module):
    def __init__(self, *, hidden_size, intermediate_size, num_heads, head_dim, rms_norm_eps=1e-6, layer_idx=0):
        super().__init__()
        self.hidden_size = hidden_size
        self.self_attn = MultiHeadAttention(head_dim=head_dim, hidden_size=hidden_size,
                                            num_attention_heads=num_heads, num_key_value_heads=num_heads,
                                            layer_idx=layer_idx)
        self.mlp = DenseMLP(hidden_size=hidden_size, intermediate_size=intermediate_size)
        self.input_layernorm = RMSNorm(hidden_size, eps=rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(hidden_size, eps=rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, seq_ctx: SequenceContext):
        residual = hidden_states

        hidden_states = self.input_layernorm(hidden_states)

        # Self Attention
        attn_outputs = self.self_attn(
            hidden_states=hidden_states,
            position_embeddings=position_embeddings,
            seq_ctx=seq_ctx,
        )
        hidden_states = attn_outputs["projected_output"]
        hidden_states = residual + hidden_states

        # Fully Connected
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states

        return hidden_states


# --- xtuner/v1/model/base.py (compile plumbing, trimmed) -----------------------
class TorchCompileOption(TypedDict):
    fullgraph: NotRequired[bool]
    dynamic: NotRequired[bool | None]
    mode: NotRequired[str | None]


DENSE_COMPILE_CFG: dict[str, TorchCompileOption] = {
    f"{__name__}.DenseDecoderLayer.forward": TorchCompileOption(fullgraph=True),
}


class BaseModel(nn.Module):
    def _compile_overwrite(self, func_name: str, compile_options: TorchCompileOption | None = None):
        compiled_function = pydoc.locate(func_name)

        if compile_options is None:
            compile_options = {}

        if compiled_function is None:
            raise AttributeError(f"Compiling Error! Cannot locate the function: {func_name}")

        # FunctionEnum.CLASS_LEVEL_FUNCTION
        qualname_split = compiled_function.__qualname__.split(".")
        assert len(qualname_split) == 2
        class_name, method_name = qualname_split
        cls = globals()[class_name]  # getattr(import_module(module_name), class_name)
        if not hasattr(compiled_function, "_torchdynamo_orig_callable"):  # is_compiled_function
            setattr(cls, method_name, torch.compile(compiled_function, backend=counting_backend, **compile_options))

    def _maybe_enable_compile(self, compile_cfg: dict[str, TorchCompileOption]):
        if compile_cfg:
            torch._dynamo.config.cache_size_limit = 256

        for target, option in compile_cfg.items():
            self._compile_overwrite(target, option)

    def _mark_dynamic(self, seq_ctx: SequenceContext, dim=0):
        """`cu_seq_lens_q` and `cu_seq_lens_k` are dynamic shapes in each
        fwd/bwd pass.

        Mark them as dynamic explicitly to avoid recompilation.
        """
        torch._dynamo.mark_dynamic(seq_ctx.cu_seq_lens_q, dim)
        torch._dynamo.mark_dynamic(seq_ctx.cu_seq_lens_k, dim)


# --- xtuner/v1/model/dense/dense.py ------------------------------------------------
class Dense(BaseModel):
    def __init__(self, vocab_size=64, hidden_size=32, intermediate_size=64, num_heads=4, num_hidden_layers=2):
        super().__init__()
        head_dim = hidden_size // num_heads
        self.norm = RMSNorm(hidden_size)
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)
        self.layers = nn.ModuleDict()
        for layer_idx in range(num_hidden_layers):
            self.layers[str(layer_idx)] = DenseDecoderLayer(hidden_size=hidden_size,
                                                            intermediate_size=intermediate_size,
                                                            num_heads=num_heads, head_dim=head_dim,
                                                            layer_idx=layer_idx)
        self.rotary_emb = RotaryEmbedding(head_dim)
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self._maybe_enable_compile(DENSE_COMPILE_CFG)

    def forward(self, seq_ctx: SequenceContext, labels: torch.Tensor):
        input_ids = seq_ctx.input_ids
        position_ids = seq_ctx.position_ids

        hidden_states = self.embed_tokens(input_ids)

        # create position embeddings to be shared across the decoder layers
        assert position_ids is not None
        position_embeddings = self.rotary_emb(hidden_states, position_ids)

        output: dict = {}

        self._mark_dynamic(seq_ctx)

        for idx, decoder_layer in self.layers.items():
            hidden_states = decoder_layer(
                hidden_states,
                position_embeddings,
                seq_ctx,
            )

        hidden_states = self.norm(hidden_states)

        logits = self.lm_head(hidden_states)
        output["loss"] = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
        output["logits"] = logits
        return output


torch.manual_seed(0)
PACK_MAX_LENGTH = 32
model = Dense().eval()

out = 0.0
with torch.no_grad():
    for step in range(6):  # each packed batch holds a different number of documents
        num_docs = [3, 4, 2, 5, 4, 3][step]
        cuts = sorted(torch.randperm(PACK_MAX_LENGTH - 1)[: num_docs - 1].add(1).tolist())
        lens = [b - a for a, b in zip([0] + cuts, cuts + [PACK_MAX_LENGTH])]
        input_ids = tuple(torch.randint(0, 64, (1, n)) for n in lens)
        seq_ctx = SequenceContext.from_input_ids(input_ids, device="cpu")
        labels = torch.roll(seq_ctx.input_ids, -1, dims=1)
        output = model(seq_ctx, labels)
        out += output["loss"].item()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
