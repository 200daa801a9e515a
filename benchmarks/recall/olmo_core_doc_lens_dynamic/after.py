# Reproduction of allenai/OLMo-core Transformer AFTER 23a3af57 ("Avoid torch recompile when intra-doc
# masking enabled (#504)", fixes #500): the fix marks `cu_doc_lens` dynamic on dim 0
# (`mark_dynamic(..., 0, strict=False)` in Transformer._prepare_inputs) and adds
# "L['kwargs']['max_doc_len']," to `torch.compiler.config.dynamic_sources` in Transformer.apply_compile.
# Before it, `cu_doc_lens` (one entry per document + 1) and `max_doc_len` (a Python int), passed as **kwargs
# into every compiled TransformerBlock and on to the flash-attn varlen kernel, changed from batch to batch,
# so the blocks (compiled with `block.compile(fullgraph=False)`, all sharing one code object) failed the
# size guard on `cu_doc_lens` and the value guard on `max_doc_len` and recompiled.
# Code (23a3af57): src/olmo_core/nn/transformer/model.py (Transformer._prepare_inputs/forward/apply_compile,
# CP/PP/TP/FSDP branches trimmed), nn/transformer/block.py (TransformerBlock), nn/attention/__init__.py
# (Attention.forward/sdpa), nn/attention/backend.py (FlashAttention2Backend.forward, varlen path),
# nn/attention/flash_attn_api.py (dispatch_flash_attn), nn/feed_forward.py, nn/layer_norm.py (RMSNorm),
# nn/residual_stream.py, data/utils.py (get_cumulative_document_lengths), utils.py (mark_dynamic).
# Stand-in: flash_attn_varlen_func (CUDA-only) is a CPU torch.library custom op with the same signature
# (opaque to Dynamo, like flash-attn's own registered ops); the LM head is a norm + linear + CE loss.
from collections import defaultdict
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- flash-attn 2 stand-in (CPU) ------------------------------------------------------------------
def _varlen_attn_ref(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal):
    out = torch.empty_like(q)
    cu_q = cu_seqlens_q.tolist()
    cu_k = cu_seqlens_k.tolist()
    for i in range(len(cu_q) - 1):
        qs, qe, ks, ke = cu_q[i], cu_q[i + 1], cu_k[i], cu_k[i + 1]
        # (1, n_heads, doc_len, head_dim)
        o = F.scaled_dot_product_attention(
            q[qs:qe].transpose(0, 1).unsqueeze(0),
            k[ks:ke].transpose(0, 1).unsqueeze(0),
            v[ks:ke].transpose(0, 1).unsqueeze(0),
            is_causal=causal,
            scale=softmax_scale,
        )
        out[qs:qe] = o.squeeze(0).transpose(0, 1)
    return out


@torch.library.custom_op("flash_attn_standin::varlen_fwd", mutates_args=())
def _flash_attn_varlen_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float,
    softmax_scale: Optional[float],
    causal: bool,
) -> torch.Tensor:
    return _varlen_attn_ref(q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)


@_flash_attn_varlen_forward.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal):
    return torch.empty_like(q)


def _flash_attn_varlen_backward(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal):
    with torch.enable_grad():
        q_, k_, v_ = (t.detach().requires_grad_() for t in (q, k, v))
        out = _varlen_attn_ref(q_, k_, v_, cu_seqlens_q, cu_seqlens_k, softmax_scale, causal)
        dq, dk, dv = torch.autograd.grad(out, (q_, k_, v_), dout)
    return dq, dk, dv


def _setup_context(ctx, inputs, output):
    q, k, v, cu_seqlens_q, cu_seqlens_k, _, _, _, softmax_scale, causal = inputs
    ctx.save_for_backward(q, k, v, cu_seqlens_q, cu_seqlens_k)
    ctx.softmax_scale = softmax_scale
    ctx.causal = causal


def _backward(ctx, dout):
    q, k, v, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
    dq, dk, dv = _flash_attn_varlen_backward(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, ctx.softmax_scale,
                                             ctx.causal)
    return dq, dk, dv, None, None, None, None, None, None, None


_flash_attn_varlen_forward.register_autograd(_backward, setup_context=_setup_context)


class flash_attn_2:  # the `flash_attn` module, as imported by flash_attn_api.py
    @staticmethod
    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                               softmax_scale=None, causal=False, window_size=(-1, -1)):
        return _flash_attn_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                          dropout_p, softmax_scale, causal)


# ---- olmo_core/utils.py, data/utils.py -------------------------------------------------------------
def mark_dynamic(x: torch.Tensor, dim: Union[int, Sequence[int]], strict: bool = True):
    """
    Mark a tensor as having dynamic sizes for ``torch.compile()``.
    """
    if strict:
        torch._dynamo.mark_dynamic(x, dim)
    else:
        torch._dynamo.maybe_mark_dynamic(x, dim)


def move_to_device(o, device):
    return o.to(device) if isinstance(o, torch.Tensor) else o


def get_cumulative_document_lengths(doc_lens: torch.Tensor) -> torch.Tensor:
    return torch.cat(
        [
            torch.tensor([0], dtype=torch.int32, device=doc_lens.device),
            torch.cumsum(doc_lens.masked_select(doc_lens != 0), 0, dtype=torch.int32),
        ]
    )


# ---- nn/attention/flash_attn_api.py ------------------------------------------------------------------
def _flatten_batch_dim(x: torch.Tensor) -> torch.Tensor:
    B, T, *other = x.shape
    return x.view(B * T, *other)


def dispatch_flash_attn(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    cu_seqlens: Optional[torch.Tensor] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    cu_seqlens_k: Optional[torch.Tensor] = None,
    max_seqlen: Optional[int] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
) -> torch.Tensor:
    if cu_seqlens is not None:
        cu_seqlens_q = cu_seqlens if cu_seqlens_q is None else cu_seqlens_q
        cu_seqlens_k = cu_seqlens if cu_seqlens_k is None else cu_seqlens_k
    if max_seqlen is not None:
        max_seqlen_q = max_seqlen if max_seqlen_q is None else max_seqlen_q
        max_seqlen_k = max_seqlen if max_seqlen_k is None else max_seqlen_k

    varlen = all(x is not None for x in (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k))

    if varlen:
        return flash_attn_2.flash_attn_varlen_func(
            _flatten_batch_dim(q),
            _flatten_batch_dim(k),
            _flatten_batch_dim(v),
            cu_seqlens_q,
            cu_seqlens_k,
            max_seqlen_q,
            max_seqlen_k,
            dropout_p=dropout_p,
            softmax_scale=softmax_scale,
            causal=causal,
            window_size=window_size,
        )
    else:
        raise NotImplementedError("flash_attn_func (non-varlen) not needed here")


# ---- nn/attention/backend.py -------------------------------------------------------------------------
class FlashAttention2Backend(nn.Module):
    def __init__(self, *, head_dim, n_heads, n_kv_heads=None, scale=None, dropout_p=0.0, window_size=(-1, -1)):
        super().__init__()
        self.head_dim = head_dim
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        self.scale = scale
        self.dropout_p = dropout_p
        self.window_size = window_size
        self.cp_enabled = False

    def forward(
        self,
        qkv: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
        cu_doc_lens: Optional[torch.Tensor] = None,
        cu_doc_lens_q: Optional[torch.Tensor] = None,
        cu_doc_lens_k: Optional[torch.Tensor] = None,
        max_doc_len: Optional[int] = None,
        max_doc_len_q: Optional[int] = None,
        max_doc_len_k: Optional[int] = None,
        local_k_slice: Optional[slice] = None,
        kv_cache_manager=None,
    ) -> torch.Tensor:
        q, k, v = qkv
        return dispatch_flash_attn(
            q,
            k,
            v,
            cu_seqlens=cu_doc_lens,
            cu_seqlens_q=cu_doc_lens_q,
            cu_seqlens_k=cu_doc_lens_k,
            max_seqlen=max_doc_len,
            max_seqlen_q=max_doc_len_q,
            max_seqlen_k=max_doc_len_k,
            dropout_p=self.dropout_p,
            softmax_scale=self.scale,
            causal=True,
            window_size=self.window_size,
        )


# ---- nn/layer_norm.py, nn/feed_forward.py, nn/residual_stream.py ---------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6, full_precision: bool = True):
        super().__init__()
        self.eps = eps
        self.full_precision = full_precision
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(enabled=False, device_type=x.device.type):
            og_dtype = x.dtype

            if self.full_precision:
                x = x.float()

            variance = x.pow(2).mean(-1, keepdim=True)
            x = x * torch.rsqrt(variance + self.eps)

            if self.weight is not None:
                if self.bias is not None:
                    x = self.weight.type_as(x) * x + self.bias.type_as(x)
                else:
                    x = self.weight.type_as(x) * x

            return x.to(og_dtype)


class FeedForward(nn.Module):
    def __init__(self, *, d_model: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.w1 = nn.Linear(d_model, hidden_size, bias=bias)
        self.w2 = nn.Linear(hidden_size, d_model, bias=bias)
        self.w3 = nn.Linear(d_model, hidden_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class ResidualStream(nn.Module):
    def __init__(self, alpha: float = 1.0, dropout: float = 0.0):
        super().__init__()
        self.alpha = alpha
        self.dropout = nn.Dropout(dropout) if dropout > 0.0 else nn.Identity()

    def forward(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.add(residual, self.dropout(x), alpha=self.alpha)


# ---- nn/attention/__init__.py ----------------------------------------------------------------------------
class Attention(nn.Module):
    def __init__(self, *, d_model: int, n_heads: int, n_kv_heads: Optional[int] = None, bias: bool = True,
                 dropout: float = 0.0, softmax_scale: Optional[float] = None):
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        self.head_dim = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.w_v = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=bias)
        self.w_out = nn.Linear(d_model, d_model, bias=bias)
        self.clip_qkv = None
        self.use_head_qk_norm = False
        self.q_norm = RMSNorm(d_model)
        self.k_norm = RMSNorm(self.n_kv_heads * self.head_dim)
        self.rope = None
        self.backend = FlashAttention2Backend(head_dim=self.head_dim, n_heads=n_heads, n_kv_heads=self.n_kv_heads,
                                              scale=softmax_scale, dropout_p=dropout)
        self.kv_cache_manager = None

    def sdpa(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_doc_lens: Optional[torch.Tensor] = None,
        cu_doc_lens_q: Optional[torch.Tensor] = None,
        cu_doc_lens_k: Optional[torch.Tensor] = None,
        max_doc_len: Optional[int] = None,
        max_doc_len_q: Optional[int] = None,
        max_doc_len_k: Optional[int] = None,
        local_k_slice: Optional[slice] = None,
        cache_leftpad: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        if self.kv_cache_manager is not None:
            self.kv_cache_manager.record_leftpad(cache_leftpad)
        # shape: (batch_size, seq_len, n_heads, head_dim)
        att = self.backend(
            (q, k, v),
            cu_doc_lens=cu_doc_lens,
            cu_doc_lens_q=cu_doc_lens_q,
            cu_doc_lens_k=cu_doc_lens_k,
            max_doc_len=max_doc_len,
            max_doc_len_q=max_doc_len_q,
            max_doc_len_k=max_doc_len_k,
            local_k_slice=local_k_slice,
            kv_cache_manager=self.kv_cache_manager,
        )
        if self.kv_cache_manager is not None:
            self.kv_cache_manager.update_seqlen(q.shape[1])
        return att

    def forward(
        self,
        x: torch.Tensor,
        cu_doc_lens: Optional[torch.Tensor] = None,
        cu_doc_lens_q: Optional[torch.Tensor] = None,
        cu_doc_lens_k: Optional[torch.Tensor] = None,
        max_doc_len: Optional[int] = None,
        max_doc_len_q: Optional[int] = None,
        max_doc_len_k: Optional[int] = None,
        local_k_slice: Optional[slice] = None,
        pos_sin: Optional[torch.Tensor] = None,
        pos_cos: Optional[torch.Tensor] = None,
        freqs_cis: Optional[torch.Tensor] = None,
        cache_leftpad: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        B, T, _ = x.shape

        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)

        if self.clip_qkv is not None:
            q.clamp_(min=-self.clip_qkv, max=self.clip_qkv)
            k.clamp_(min=-self.clip_qkv, max=self.clip_qkv)
            v.clamp_(min=-self.clip_qkv, max=self.clip_qkv)

        if not self.use_head_qk_norm:
            if self.q_norm is not None:
                q = self.q_norm(q)
            if self.k_norm is not None:
                k = self.k_norm(k)

        q = q.view(B, T, -1, self.head_dim)
        k = k.view(B, T, -1, self.head_dim)
        v = v.view(B, T, -1, self.head_dim)

        # shape: (batch_size, seq_len, n_heads, head_dim)
        att = self.sdpa(
            q,
            k,
            v,
            cu_doc_lens=cu_doc_lens,
            cu_doc_lens_q=cu_doc_lens_q,
            cu_doc_lens_k=cu_doc_lens_k,
            max_doc_len=max_doc_len,
            max_doc_len_q=max_doc_len_q,
            max_doc_len_k=max_doc_len_k,
            local_k_slice=local_k_slice,
            cache_leftpad=cache_leftpad,
        )

        # shape: (batch_size, seq_len, d_model)
        att = att.view(B, T, -1)

        # shape: (batch_size, seq_len, d_model)
        return self.w_out(att)


# ---- nn/transformer/block.py -----------------------------------------------------------------------------
class TransformerBlockBase(nn.Module):
    def __init__(self, *, n_layers: int):
        super().__init__()
        self.n_layers = n_layers

    def apply_compile(self):
        self.compile(fullgraph=False, backend=counting_backend)


class TransformerBlock(TransformerBlockBase):
    def __init__(self, *, d_model: int, block_idx: int, n_layers: int, n_heads: int, hidden_size: int,
                 dropout: float = 0.0, attention_residual_alpha: float = 1.0,
                 feed_forward_residual_alpha: float = 1.0):
        super().__init__(n_layers=n_layers)
        self.d_model = d_model
        self.block_idx = block_idx
        self.attention = Attention(d_model=d_model, n_heads=n_heads)
        self.attention_norm = RMSNorm(d_model)
        self.attention_residual_stream = ResidualStream(alpha=attention_residual_alpha, dropout=dropout)
        self.feed_forward = FeedForward(d_model=d_model, hidden_size=hidden_size)
        self.feed_forward_norm = RMSNorm(d_model)
        self.feed_forward_residual_stream = ResidualStream(alpha=feed_forward_residual_alpha, dropout=dropout)

    def forward(
        self,
        x: torch.Tensor,
        *,
        loss_div_factor: Optional[Union[torch.Tensor, float]] = None,
        **kwargs,
    ) -> torch.Tensor:
        del loss_div_factor
        h = self.attention_residual_stream(x, self.attention(self.attention_norm(x), **kwargs))
        return self.feed_forward_residual_stream(h, self.feed_forward(self.feed_forward_norm(h)))


# ---- nn/lm_head.py (reduced) -----------------------------------------------------------------------------
class LMHead(nn.Module):
    def __init__(self, *, d_model: int, vocab_size: int):
        super().__init__()
        self.norm = RMSNorm(d_model)
        self.w_out = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, x, *, labels=None, ignore_index=-100, loss_reduction="mean", z_loss_multiplier=None,
                loss_div_factor=None, return_logits=None, logits_to_keep=0):
        logits = self.w_out(self.norm(x))
        if labels is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1),
                               ignore_index=ignore_index, reduction=loss_reduction)


# ---- nn/transformer/model.py -----------------------------------------------------------------------------
class Transformer(nn.Module):
    def __init__(self, *, d_model: int, vocab_size: int, n_layers: int, n_heads: int, hidden_size: int):
        super().__init__()
        self.d_model = d_model
        self.vocab_size = vocab_size
        self.n_layers = n_layers
        self.embeddings = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleDict()
        for block_idx in range(n_layers):
            self.blocks[str(block_idx)] = TransformerBlock(d_model=d_model, block_idx=block_idx, n_layers=n_layers,
                                                           n_heads=n_heads, hidden_size=hidden_size)
        self.lm_head = LMHead(d_model=d_model, vocab_size=vocab_size)
        self._cp_load_balancer = None
        self._compile_enabled = False

    @property
    def device(self) -> torch.device:
        return self.embeddings.weight.device

    @property
    def compile_enabled(self) -> bool:
        return self._compile_enabled

    def _prepare_inputs(
        self,
        input_ids: torch.Tensor,
        labels: Optional[torch.Tensor] = None,
        *,
        ignore_index: int = -100,
        loss_reduction: Literal["mean", "sum", "none"] = "mean",
        z_loss_multiplier: Optional[float] = None,
        loss_div_factor: Optional[Union[torch.Tensor, float]] = None,
        return_logits: Optional[bool] = None,
        logits_to_keep: Union[int, torch.Tensor] = 0,
        **kwargs,
    ):
        B, S = input_ids.shape[:2]

        all_block_kwargs: Dict[str, Any] = {}
        per_block_kwargs: Dict[int, Dict[str, Any]] = defaultdict(dict)
        lm_head_kwargs: Dict[str, Any] = dict(
            ignore_index=ignore_index,
            loss_reduction=loss_reduction,
            z_loss_multiplier=z_loss_multiplier,
            return_logits=return_logits,
            logits_to_keep=logits_to_keep,
        )

        if loss_div_factor is not None:
            loss_div_factor = move_to_device(loss_div_factor, self.device)
            lm_head_kwargs["loss_div_factor"] = loss_div_factor
            all_block_kwargs["loss_div_factor"] = loss_div_factor

        # Prepare document length inputs.
        max_doc_len: Optional[int] = None
        cu_doc_lens: Optional[torch.Tensor] = None
        doc_lens: Optional[torch.Tensor] = None
        cache_leftpad: Optional[torch.Tensor] = kwargs.pop("cache_leftpad", None)

        if (doc_lens := kwargs.pop("doc_lens", None)) is not None and (
            max_doc_lens := kwargs.pop("max_doc_lens", None)
        ) is not None:
            max_doc_len = max(max_doc_lens)
            cu_doc_lens = get_cumulative_document_lengths(doc_lens)

        # (context-parallel branch trimmed: self._cp_load_balancer is None)
        input_ids = move_to_device(input_ids, self.device)
        labels = move_to_device(labels, self.device)

        if (max_doc_len is not None or cu_doc_lens is not None) and cache_leftpad is not None:
            raise ValueError("max_doc_len/cu_doc_lens and cache_leftpad are mutually exclusive")
        if max_doc_len is not None or cu_doc_lens is not None:
            all_block_kwargs["max_doc_len"] = max_doc_len
            all_block_kwargs["cu_doc_lens"] = move_to_device(cu_doc_lens, self.device)
        if cache_leftpad is not None:
            all_block_kwargs["cache_leftpad"] = move_to_device(cache_leftpad, self.device)

        if "cu_doc_lens" in all_block_kwargs:
            mark_dynamic(all_block_kwargs["cu_doc_lens"], 0, strict=False)  # type: ignore[arg-type]

        return (
            input_ids,
            labels,
            all_block_kwargs,
            per_block_kwargs,
            lm_head_kwargs,
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        labels: Optional[torch.Tensor] = None,
        ignore_index: int = -100,
        loss_reduction: Literal["mean", "sum", "none"] = "mean",
        z_loss_multiplier: Optional[float] = None,
        loss_div_factor: Optional[Union[torch.Tensor, float]] = None,
        return_logits: Optional[bool] = None,
        logits_to_keep: Union[int, torch.Tensor] = 0,
        **kwargs,
    ):
        (
            input_ids,
            labels,
            all_block_kwargs,
            per_block_kwargs,
            lm_head_kwargs,
        ) = self._prepare_inputs(
            input_ids,
            labels,
            ignore_index=ignore_index,
            loss_reduction=loss_reduction,
            z_loss_multiplier=z_loss_multiplier,
            loss_div_factor=loss_div_factor,
            return_logits=return_logits,
            logits_to_keep=logits_to_keep,
            **kwargs,
        )

        h = self.embeddings(input_ids) if self.embeddings is not None else input_ids

        # Run each block.
        for block_key, block in self.blocks.items():
            block_idx = int(block_key)
            block_kwargs = per_block_kwargs.get(block_idx, {})
            # Mark sizes as dynamic for torch.compile().
            if self.compile_enabled:
                mark_dynamic(h, (0, 1), strict=False)
            h = block(h, **all_block_kwargs, **block_kwargs)

        if self.lm_head is not None:
            if self.compile_enabled:
                mark_dynamic(h, (0, 1), strict=False)
                if labels is not None:
                    mark_dynamic(labels, (0, 1), strict=False)
            if labels is not None:
                lm_head_kwargs["labels"] = labels
            return self.lm_head(h, **lm_head_kwargs)
        else:
            return h

    def apply_compile(self):
        """
        Apply ``torch.compile()`` to each transformer block, which makes compilation efficient
        due to repeated structure.
        """
        for block in self.blocks.values():
            block.apply_compile()

        if self.lm_head is not None:
            self.lm_head.compile(fullgraph=False, backend=counting_backend)

        torch.compiler.config.dynamic_sources += "L['kwargs']['max_doc_len'],"
        self._compile_enabled = True


# ---- driver: packed fixed-length instances with intra-document masking (collator: doc_lens padded with 0,
# max_doc_lens a list of ints), a few training steps as in TransformerTrainModule.train_batch ------------------
def make_batch(gen, batch_size, seq_len, vocab_size, doc_counts):
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len), generator=gen)
    labels = torch.roll(input_ids, -1, dims=1)
    all_doc_lens = []
    for n_docs in doc_counts:
        cuts = sorted(torch.randperm(seq_len - 1, generator=gen)[: n_docs - 1].add(1).tolist())
        bounds = [0] + cuts + [seq_len]
        all_doc_lens.append(torch.tensor([b - a for a, b in zip(bounds[:-1], bounds[1:])], dtype=torch.int32))
    max_docs = max(len(d) for d in all_doc_lens)
    doc_lens = torch.stack([F.pad(d, (0, max_docs - len(d)), value=0) for d in all_doc_lens])
    max_doc_lens = [int(d.max()) for d in all_doc_lens]
    return input_ids, labels, doc_lens, max_doc_lens


torch.manual_seed(0)
vocab_size, seq_len, batch_size = 64, 32, 2
model = Transformer(d_model=32, vocab_size=vocab_size, n_layers=2, n_heads=4, hidden_size=64)
model.apply_compile()
optim = torch.optim.SGD(model.parameters(), lr=0.1)

gen = torch.Generator().manual_seed(0)
checksum = 0.0
for step, doc_counts in enumerate([(3, 2), (4, 3), (2, 5), (3, 3)]):
    input_ids, labels, doc_lens, max_doc_lens = make_batch(gen, batch_size, seq_len, vocab_size, doc_counts)
    optim.zero_grad()
    loss = model(input_ids, labels=labels, doc_lens=doc_lens, max_doc_lens=max_doc_lens)
    loss.backward()
    optim.step()
    checksum += loss.item()
checksum += sum(p.double().sum().item() for p in model.parameters())
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
