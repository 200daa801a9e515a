"""xtuner 567df4be^ : `SequenceContext.max_length_q` / `max_length_k` are Python
ints (the longest packed document of the batch) read inside the compiled
`DenseDecoderLayer.forward` and handed to flash-attn's varlen op, so a batch
whose longest document differs recompiles the layer
(xtuner/v1/data_proto/sequence_context.py, xtuner/v1/ops/flash_attn/__init__.py).

Trimmed CPU reproduction: flash-attn's CUDA varlen kernel is stood in by a CPU
body of the same `torch.library.custom_op` signature (per-document causal
attention), FSDP / float8 / sequence parallel / the loss context are dropped.
"""
import functools
from dataclasses import dataclass
from typing import Optional, Tuple, cast

import torch
import torch.nn.functional as F
from torch import nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# --- xtuner/v1/utils/compile.py (trimmed) ------------------------------------------
TARGET_DEVICE = "cuda"  # get_device(); the real code only compiles on cuda


class MaybeCompile:
    def __init__(self):
        self._mode = "all"
        self._compile_targets = {}
        self._excluded_targets = set()
        self._compiled_funcs = {}

    def __call__(self, fn=None, **compile_kwargs):
        """Apply the decorator with optional torch.compile arguments."""

        def decorator(func):
            original_func = func
            module_name = original_func.__module__
            func_name = original_func.__qualname__
            func_id = f"{module_name}.{func_name}"

            # Check if this function should be compiled
            should_compile = self._should_compile(module_name, func_name)

            # Compile if needed and not already compiled
            if should_compile and func_id not in self._compiled_funcs:
                func_compile_kwargs = compile_kwargs
                # Compile the function
                self._compiled_funcs[func_id] = torch.compile(original_func, backend=counting_backend,
                                                              **func_compile_kwargs)

            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                # Use compiled or original function
                if func_id in self._compiled_funcs:
                    return self._compiled_funcs[func_id](*args, **kwargs)
                else:
                    return original_func(*args, **kwargs)

            return wrapper

        # Handle both @maybe_compile and @maybe_compile() usage
        if fn is None:
            return decorator
        return decorator(fn)

    def _should_compile(self, module_name: str, func_qualname: str) -> bool:
        if TARGET_DEVICE != "cuda":
            return False
        target_key = (module_name, func_qualname)
        if target_key in self._excluded_targets:
            return False
        return self._mode == "all"


maybe_compile = MaybeCompile()


# --- xtuner/v1/data_proto/sequence_context.py (trimmed) -----------------------
@dataclass
class SequenceContext:
    """Keyword arguments for Flash Attention with Compile.

    Attributes:
        cu_seq_lens_q (`torch.LongTensor`, *optional*)
            Gets cumulative sequence length for query state.
        cu_seq_lens_k (`torch.LongTensor`, *optional*)
            Gets cumulative sequence length for key state.
        max_length_q (`int`, *optional*):
            Maximum sequence length for query state.
        max_length_k (`int`, *optional*):
            Maximum sequence length for key state.
    """

    input_ids: torch.LongTensor  # shape (1, seq_len)
    cu_seq_lens_q: torch.IntTensor
    cu_seq_lens_k: torch.IntTensor
    max_length_q: int
    max_length_k: int
    num_padding: int = 0
    sequence_parallel_mesh: None = None
    device: str | torch.device = "cpu"
    position_ids: torch.LongTensor | None = None

    def __post_init__(self):
        if self.position_ids is None:
            seq_lens_k = self.cu_seq_lens_k[1:] - self.cu_seq_lens_k[:-1]
            seq_lens_q = self.cu_seq_lens_q[1:] - self.cu_seq_lens_q[:-1]

            _position_ids = [torch.arange(k - q, k) for q, k in zip(seq_lens_q, seq_lens_k)]
            position_ids = torch.cat(_position_ids).unsqueeze(0).to(self.cu_seq_lens_k.device)

            self.position_ids = position_ids

    @classmethod
    def from_input_ids(cls, input_ids, device="cpu"):
        assert isinstance(input_ids, (list, tuple))
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


# --- flash_attn.flash_attn_interface (flash-attn 2, CPU stand-in kernel) -------
@torch.library.custom_op("flash_attn::_flash_attn_varlen_forward", mutates_args=(), device_types="cpu")
def _flash_attn_varlen_forward(
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


@torch.library.register_fake("flash_attn::_flash_attn_varlen_forward")
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


_wrapped_flash_attn_varlen_forward = torch.ops.flash_attn._flash_attn_varlen_forward


class FlashAttnVarlenFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
                causal, window_size, softcap, alibi_slopes, deterministic, return_softmax, block_table,
                is_grad_enabled):
        if softmax_scale is None:
            softmax_scale = q.shape[-1] ** (-0.5)
        out_padded, softmax_lse, S_dmask, rng_state = _wrapped_flash_attn_varlen_forward(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale,
            causal=causal, window_size_left=window_size[0], window_size_right=window_size[1], softcap=softcap,
            alibi_slopes=alibi_slopes, return_softmax=return_softmax and dropout_p > 0, block_table=block_table,
        )
        out = out_padded
        return out if not return_softmax else (out, softmax_lse, S_dmask)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    return FlashAttnVarlenFunc.apply(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal,
        window_size, softcap, alibi_slopes, deterministic, return_attn_probs, block_table, torch.is_grad_enabled(),
    )


# --- xtuner/v1/ops/flash_attn/__init__.py ----------------------------------------
def get_flash_attn_varlen():
    device = "cuda"  # get_device()
    if device == "cuda":
        # from flash_attn import flash_attn_varlen_func
        return flash_attn_varlen


flash_attn_varlen = flash_attn_varlen_func
flash_attn_varlen_func = get_flash_attn_varlen()


# --- xtuner/v1/ops/attn_imp.py ---------------------------------------------------
def flash_attention(q, k, v, window_size=(-1, -1), s_aux=None, **kwargs) -> torch.Tensor:
    # q, k, v: [b, n_head, seq , head_dim]
    assert q.size(0) == 1, "Only support batch size 1 for flash attention"
    q = q.transpose(1, 2).squeeze(0)  # [seq, head, dim]
    k = k.transpose(1, 2).squeeze(0)
    v = v.transpose(1, 2).squeeze(0)

    attention_output: torch.Tensor
    attention_output = flash_attn_varlen_func(q, k, v, **kwargs)
    return attention_output[None]


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
        self.attn_impl_func = attn_impl_mapping[attn_impl]

    def forward(self, hidden_states, position_embeddings, seq_ctx: SequenceContext) -> torch.Tensor:
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
        assert key_states.size(0) == 1
        assert value_states.size(0) == 1

        assert isinstance(seq_ctx.max_length_q, int)
        assert isinstance(seq_ctx.max_length_k, int)

        # [b, n_head, seq, head_dim]
        attn_output: torch.Tensor = self.attn_impl_func(
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
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.o_proj(attn_output)
        return attn_output


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

    @maybe_compile(fullgraph=True)
    def forward(self, hidden_states, position_embeddings, seq_ctx: SequenceContext) -> torch.Tensor:
        residual = hidden_states

        hidden_states = self.input_layernorm(hidden_states)

        # Self Attention
        hidden_states = self.self_attn(
            hidden_states=hidden_states,
            position_embeddings=position_embeddings,
            seq_ctx=seq_ctx,
        )
        hidden_states = residual + hidden_states

        # Fully Connected
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states

        return hidden_states


# --- xtuner/v1/model/dense/dense.py ------------------------------------------------
class Dense(nn.Module):
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
        torch._dynamo.config.cache_size_limit = 256  # BaseModel._maybe_compile_layers (fsdp_config.torch_compile)

    def forward(self, seq_ctx: SequenceContext, labels: torch.Tensor):
        input_ids = seq_ctx.input_ids
        position_ids = seq_ctx.position_ids

        hidden_states = self.embed_tokens(input_ids)

        # create position embeddings to be shared across the decoder layers
        assert position_ids is not None
        position_embeddings = self.rotary_emb(hidden_states, position_ids)

        output: dict = {}

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
    for step in range(6):  # packs of 3 documents; the longest document differs from pack to pack
        lens = [[14, 10, 8], [9, 17, 6], [12, 12, 8], [20, 6, 6], [11, 11, 10], [5, 13, 14]][step]
        input_ids = tuple(torch.randint(0, 64, (1, n)) for n in lens)
        seq_ctx = SequenceContext.from_input_ids(input_ids, device="cpu")
        labels = torch.roll(seq_ctx.input_ids, -1, dims=1)
        output = model(seq_ctx, labels)
        out += output["loss"].item()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
