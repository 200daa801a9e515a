# Reproduction of NVIDIA-NeMo/Automodel BEFORE 9170d19f6 ("fix(speculative): compile variable-shape flex
# callables with dynamic shapes (#2532)", 2026-06-12): DFlash draft training builds a FlexAttention BlockMask
# every step through a singleton `torch.compile(create_block_mask, dynamic=False)`. The mask shape
# (Q_LEN = N * block_size, KV_LEN = ctx_len + N * block_size) follows the per-batch anchor count
# N = min(num_anchors, valid anchors in the batch), so every batch with a new anchor count re-specializes
# the compiled create_block_mask, until the recompile limit.
# (nemo_automodel/components/attention/dflash_mask.py, components/speculative/dflash/core.py,
#  components/loss/dllm_loss.py, recipes/llm/train_dflash.py at 9170d19f6^, trimmed; the transformers
#  Qwen3 draft model is replaced by a small stand-in with the same class/forward structure.)
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, create_mask

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- nemo_automodel/components/attention/dflash_mask.py (verbatim but the backend) --------------------

# Singleton-cached torch.compile of ``create_block_mask``. The mask_mod closure
# changes per step (new anchor positions), but the create_block_mask machinery
# itself is identical — compiling once and reusing avoids per-step Python
# overhead of evaluating mask_mod across the BlockMask grid.
_compiled_create_block_mask = None


def _get_compiled_create_block_mask():
    """Lazy-initialise a compiled ``create_block_mask`` and cache it."""
    global _compiled_create_block_mask
    if _compiled_create_block_mask is None:
        _compiled_create_block_mask = torch.compile(create_block_mask, dynamic=False, backend=counting_backend)
    return _compiled_create_block_mask


def create_dflash_block_mask(
    anchor_positions: torch.Tensor,
    block_keep_mask: torch.Tensor,
    ctx_len: int,
    block_size: int,
    device: torch.device,
    use_compile: bool = True,
) -> "BlockMask":
    """Build a sparse FlexAttention :class:`BlockMask` for DFlash training."""
    B, N = anchor_positions.shape
    Q_LEN = N * block_size
    KV_LEN = ctx_len + N * block_size

    # Capture the input tensors via closure. mask_mod must use only tensor ops
    # (no Python control flow) so torch.compile can trace it.
    def dflash_mask_mod(b, h, q_idx, kv_idx):
        q_block = q_idx // block_size
        safe_q_block = q_block.clamp(max=N - 1)
        anchor = anchor_positions[b, safe_q_block]

        is_ctx = kv_idx < ctx_len
        ctx_visible = is_ctx & (kv_idx < anchor)

        is_noise = kv_idx >= ctx_len
        kv_block = (kv_idx - ctx_len) // block_size
        noise_visible = is_noise & (q_block == kv_block)

        keep = block_keep_mask[b, safe_q_block]
        in_bounds = q_block < N
        return (ctx_visible | noise_visible) & keep & in_bounds

    # ``BLOCK_SIZE`` is left at the default (128).
    builder = _get_compiled_create_block_mask() if use_compile else create_block_mask
    return builder(
        dflash_mask_mod,
        B=B,
        H=None,
        Q_LEN=Q_LEN,
        KV_LEN=KV_LEN,
        device=device,
    )


# ---- nemo_automodel/components/loss/dllm_loss.py (DFlashDecayLoss, non-fused path, verbatim) -----------

class DLLMLossOutput(NamedTuple):
    total_loss: torch.Tensor
    dllm_loss: torch.Tensor
    draft_correct_per_pos: Optional[torch.Tensor] = None
    draft_count_per_pos: Optional[torch.Tensor] = None


def _compute_per_token_nll(logits: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
    """Compute per-token negative log-likelihood, shape ``[B, L]``."""
    V = logits.size(-1)
    return F.cross_entropy(
        logits.reshape(-1, V),
        target_ids.reshape(-1).to(logits.device),
        reduction="none",
    ).view(target_ids.shape)


class DFlashDecayLoss(nn.Module):
    def __init__(self, loss_gamma: Optional[float] = 7.0, use_fused_linear_ce: bool = False,
                 chunk_size: int = 1024, normalize: str = "tokens"):
        super().__init__()
        if normalize not in ("tokens", "mean"):
            raise ValueError(f"normalize must be 'tokens' or 'mean', got {normalize!r}")
        self.loss_gamma = None if loss_gamma is None else float(loss_gamma)
        self.use_fused_linear_ce = bool(use_fused_linear_ce)
        self.chunk_size = int(chunk_size)
        self.normalize = normalize

    def _decay_weights(self, T: int, block_size: Optional[int], device, dtype) -> torch.Tensor:
        if self.loss_gamma is None:
            return torch.ones(T, device=device, dtype=dtype)
        if block_size is not None:
            T_per = block_size - 1
            n_blocks = T // T_per if T_per > 0 else 1
            w_single = torch.exp(-torch.arange(T_per, device=device, dtype=dtype) / self.loss_gamma)
            return w_single.repeat(n_blocks)
        return torch.exp(-torch.arange(T, device=device, dtype=dtype) / self.loss_gamma)

    def _reduce(self, token_nll, block_mask, num_tokens, block_size,
                draft_correct_per_pos=None, draft_count_per_pos=None) -> DLLMLossOutput:
        _, T = token_nll.shape
        w = self._decay_weights(T, block_size, token_nll.device, token_nll.dtype)
        weights = w.unsqueeze(0) * block_mask.to(token_nll.dtype)  # [B, T]
        loss = (token_nll * weights).sum()
        if self.normalize == "mean":
            loss = loss / (weights.sum() + 1e-6)
        elif num_tokens is not None:
            loss = loss / max(float(num_tokens), 1.0)
        return DLLMLossOutput(
            total_loss=loss,
            dllm_loss=loss.detach().clone(),
            draft_correct_per_pos=draft_correct_per_pos,
            draft_count_per_pos=draft_count_per_pos,
        )

    @staticmethod
    def _draft_acc_per_pos(correct, block_mask, block_size):
        if block_size is None or block_size <= 1:
            return None, None
        T_per = block_size - 1
        B, T = correct.shape
        if T % T_per != 0:
            return None, None
        N = T // T_per
        c = correct.to(block_mask.dtype).view(B, N, T_per)
        m = block_mask.view(B, N, T_per)
        correct_per_pos = (c * m).sum(dim=(0, 1))  # [block_size-1]
        count_per_pos = m.sum(dim=(0, 1))  # [block_size-1]
        return correct_per_pos, count_per_pos

    def forward(self, logits, target_ids, block_mask, num_tokens=None, block_size=None) -> DLLMLossOutput:
        token_nll = _compute_per_token_nll(logits, target_ids)  # [B, T]
        correct = logits.argmax(dim=-1) == target_ids  # [B, T]
        del logits
        c_per_pos, n_per_pos = self._draft_acc_per_pos(correct, block_mask, block_size)
        return self._reduce(token_nll, block_mask, num_tokens, block_size,
                            draft_correct_per_pos=c_per_pos, draft_count_per_pos=n_per_pos)


# ---- draft model stand-in (components/speculative/dflash/draft_qwen3.py without transformers) ----------

@dataclass
class Qwen3Config:
    vocab_size: int = 64
    hidden_size: int = 32
    intermediate_size: int = 64
    num_hidden_layers: int = 1
    num_attention_heads: int = 2
    num_key_value_heads: int = 2
    head_dim: int = 16
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    num_target_layers: int = 4
    block_size: int = 4
    _attn_implementation: str = "flex_attention"


class Qwen3RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


class Qwen3MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Qwen3RotaryEmbedding(nn.Module):
    def __init__(self, config):
        super().__init__()
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, config.head_dim, 2).float() / config.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_len = q.size(-2)
    q_embed = (q * cos[..., -q_len:, :]) + (rotate_half(q) * sin[..., -q_len:, :])
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def flex_attention_forward(module, query, key, value, attention_mask, scaling=None, **kwargs):
    # Stand-in for transformers' "flex_attention" backend, which calls
    # flex_attention(query, key, value, block_mask=attention_mask, scale=scaling). FlexAttention has no
    # backward on CPU, so the BlockMask's own mask_mod is evaluated densely (create_mask) and applied to a
    # plain softmax attention; fully masked rows (dropped anchors) give 0, as flex_attention does.
    B, H, Q_LEN, _ = query.shape
    KV_LEN = key.shape[-2]
    dense = create_mask(attention_mask.mask_mod, B, None, Q_LEN, KV_LEN, device=query.device)
    scores = (query @ key.transpose(-2, -1)) * scaling
    scores = scores.masked_fill(~dense, float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    out = probs @ value
    return out.transpose(1, 2).contiguous(), None


class Qwen3DFlashAttention(nn.Module):
    def __init__(self, config: Qwen3Config, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.scaling = self.head_dim**-0.5
        self.q_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(config.num_attention_heads * self.head_dim, config.hidden_size, bias=False)
        self.q_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, hidden_states, target_hidden, position_embeddings, attention_mask, **kwargs):
        bsz, q_len = hidden_states.shape[:-1]
        ctx_len = target_hidden.shape[1]
        q = self.q_proj(hidden_states).view(bsz, q_len, -1, self.head_dim)
        q = self.q_norm(q).transpose(1, 2)
        k_ctx = self.k_proj(target_hidden)
        k_noise = self.k_proj(hidden_states)
        v_ctx = self.v_proj(target_hidden)
        v_noise = self.v_proj(hidden_states)
        k = torch.cat([k_ctx, k_noise], dim=1).view(bsz, ctx_len + q_len, -1, self.head_dim)
        v = torch.cat([v_ctx, v_noise], dim=1).view(bsz, ctx_len + q_len, -1, self.head_dim)
        k = self.k_norm(k).transpose(1, 2)
        v = v.transpose(1, 2)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        attn_output, attn_weights = flex_attention_forward(self, q, k, v, attention_mask, scaling=self.scaling)
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.o_proj(attn_output), attn_weights


class Qwen3DFlashDecoderLayer(nn.Module):
    def __init__(self, config: Qwen3Config, layer_idx: int):
        super().__init__()
        self.self_attn = Qwen3DFlashAttention(config=config, layer_idx=layer_idx)
        self.mlp = Qwen3MLP(config)
        self.input_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, target_hidden=None, hidden_states=None, attention_mask=None, position_ids=None,
                position_embeddings=None, **kwargs):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(
            hidden_states=hidden_states,
            target_hidden=target_hidden,
            attention_mask=attention_mask,
            position_embeddings=position_embeddings,
        )[0]
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    span = end - start
    return [int(round(start + (i * span) / (num_draft_layers - 1))) for i in range(num_draft_layers)]


def extract_context_feature(hidden_states: list[torch.Tensor], layer_ids: list[int]) -> torch.Tensor:
    offset = 1
    return torch.cat([hidden_states[layer_id + offset] for layer_id in layer_ids], dim=-1)


class Qwen3DFlashDraftModel(nn.Module):
    def __init__(self, config) -> None:
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList(
            [Qwen3DFlashDecoderLayer(config, layer_idx) for layer_idx in range(config.num_hidden_layers)]
        )
        self.target_layer_ids = build_target_layer_ids(config.num_target_layers, config.num_hidden_layers)
        self.norm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = Qwen3RotaryEmbedding(config)
        self.fc = nn.Linear(len(self.target_layer_ids) * config.hidden_size, config.hidden_size, bias=False)
        self.hidden_norm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.block_size = config.block_size

    def forward(self, position_ids, attention_mask=None, noise_embedding=None, target_hidden=None, **kwargs):
        hidden_states = noise_embedding
        target_hidden = self.hidden_norm(self.fc(target_hidden))
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(
                hidden_states=hidden_states,
                target_hidden=target_hidden,
                attention_mask=attention_mask,
                position_ids=position_ids,
                position_embeddings=position_embeddings,
            )
        return self.norm(hidden_states)


# ---- nemo_automodel/components/speculative/dflash/core.py (verbatim, docstrings trimmed) ---------------

class NoValidAnchorsError(ValueError):
    pass


@dataclass
class DFlashStepMetrics:
    loss: torch.Tensor
    accuracy: torch.Tensor
    valid_tokens: torch.Tensor


class DFlashTrainerModule(nn.Module):
    """DFlash online training wrapper with block-wise CE loss."""

    def __init__(self, draft_model, target_lm_head, target_embed_tokens, mask_token_id, block_size=16,
                 attention_backend="flex_attention", num_anchors=512, loss_decay_gamma=None):
        super().__init__()
        self.draft_model = draft_model
        self.lm_head = target_lm_head
        self.embed_tokens = target_embed_tokens
        self.block_size = block_size
        self.mask_token_id = mask_token_id
        self.attention_backend = attention_backend
        self.num_anchors = num_anchors
        self.loss_decay_gamma = loss_decay_gamma
        self.loss_fn = DFlashDecayLoss(loss_gamma=loss_decay_gamma, normalize="mean")
        self.register_buffer("_block_offsets", torch.arange(block_size).view(1, 1, -1), persistent=False)

    def _sample_anchor_positions(self, seq_len: int, loss_mask: torch.Tensor, device: torch.device):
        """Randomly sample anchor positions per sample; returns ``(anchors, keep_mask)``."""
        bs = self.block_size
        bsz = loss_mask.shape[0]
        max_anchor = max(seq_len - bs, 0)

        valid = loss_mask[:, : max_anchor + 1] > 0.5
        valid_counts = valid.sum(dim=1)
        max_n = min(self.num_anchors, int(valid_counts.max().item()))
        if max_n <= 0:
            raise NoValidAnchorsError(
                "No valid anchor positions in this batch; every sample has fewer than "
                f"block_size+1 ({bs + 1}) supervised tokens."
            )

        indices = torch.arange(max_anchor + 1, device=device).unsqueeze(0).expand(bsz, -1)
        masked_indices = torch.where(valid, indices, torch.tensor(seq_len + 1, device=device))

        random_vals = torch.rand(bsz, max_anchor + 1, device=device)
        random_vals = torch.where(valid, random_vals, torch.tensor(2.0, device=device))

        _, sorted_idx = random_vals.sort(dim=1)
        gathered = torch.gather(masked_indices, 1, sorted_idx)
        anchors = gathered[:, :max_n].sort(dim=1).values

        keep_mask = torch.arange(max_n, device=device).unsqueeze(0) < valid_counts.unsqueeze(1).clamp(max=max_n)
        anchors = torch.where(keep_mask, anchors, torch.tensor(0, dtype=torch.long, device=device))
        return anchors, keep_mask

    def _create_position_ids(self, anchor_positions: torch.Tensor) -> torch.Tensor:
        bsz = anchor_positions.shape[0]
        offsets = torch.arange(self.block_size, device=anchor_positions.device).view(1, 1, -1)
        pos_ids = anchor_positions.unsqueeze(-1) + offsets
        return pos_ids.view(bsz, -1)

    def _create_noise_embed(self, input_ids, anchor_positions, block_keep_mask):
        bsz, seq_len = input_ids.shape
        n = anchor_positions.shape[1]
        bs = self.block_size
        device = input_ids.device

        noise_ids = torch.full((bsz, n * bs), self.mask_token_id, dtype=torch.long, device=device)
        block_starts = (torch.arange(n, device=device) * bs).unsqueeze(0).expand(bsz, -1)

        valid_anchor_positions = anchor_positions.clamp(0, seq_len - 1)
        anchor_tokens = torch.gather(input_ids, 1, valid_anchor_positions)

        flat_batch_idx = torch.arange(bsz, device=device).unsqueeze(1).expand(bsz, n)
        noise_ids[flat_batch_idx, block_starts] = torch.where(
            block_keep_mask,
            anchor_tokens,
            torch.tensor(self.mask_token_id, dtype=torch.long, device=device),
        )
        return self.embed_tokens(noise_ids)

    def forward(self, input_ids, hidden_states, loss_mask) -> DFlashStepMetrics:
        """Parallel block-wise training forward pass."""
        bsz, seq_len = input_ids.shape
        device = input_ids.device

        anchor_positions, block_keep_mask = self._sample_anchor_positions(seq_len, loss_mask, device)
        noise_embedding = self._create_noise_embed(input_ids, anchor_positions, block_keep_mask)

        context_position_ids = torch.arange(seq_len, device=device).unsqueeze(0).expand(bsz, -1)
        draft_position_ids = self._create_position_ids(anchor_positions)
        full_position_ids = torch.cat([context_position_ids, draft_position_ids], dim=1)

        if self.attention_backend == "flex_attention":
            dflash_attn_mask = create_dflash_block_mask(
                anchor_positions, block_keep_mask, seq_len, self.block_size, device
            )
        else:
            raise NotImplementedError("sdpa backend trimmed")

        output_hidden = self.draft_model(
            position_ids=full_position_ids,
            noise_embedding=noise_embedding,
            target_hidden=hidden_states,
            attention_mask=dflash_attn_mask,
        )
        logits = self.lm_head(output_hidden)

        n = anchor_positions.size(1)
        bs = self.block_size

        label_indices = anchor_positions.unsqueeze(-1) + self._block_offsets
        valid_label_mask = label_indices < seq_len
        safe_label_indices = label_indices.clamp(max=seq_len - 1)
        target_ids = torch.gather(input_ids.unsqueeze(1).expand(-1, n, -1), 2, safe_label_indices)

        gathered_loss_mask = torch.gather(loss_mask.unsqueeze(1).expand(-1, n, -1), 2, safe_label_indices)
        block_mask = block_keep_mask.unsqueeze(-1).float() * valid_label_mask.float() * gathered_loss_mask

        pred_logits = logits.view(bsz, n, bs, -1)[:, :, 1:, :].reshape(bsz, n * (bs - 1), -1)
        pred_targets = target_ids[:, :, 1:].reshape(bsz, n * (bs - 1))
        pred_mask = block_mask[:, :, 1:].reshape(bsz, n * (bs - 1))

        loss_out = self.loss_fn(pred_logits, pred_targets, pred_mask, num_tokens=None, block_size=bs)

        count_per_pos = loss_out.draft_count_per_pos
        valid_tokens = count_per_pos.sum()
        accuracy = loss_out.draft_correct_per_pos.sum() / (valid_tokens + 1e-6)

        return DFlashStepMetrics(
            loss=loss_out.total_loss, accuracy=accuracy.detach(), valid_tokens=valid_tokens.detach()
        )


# ---- frozen target stand-in + recipes/llm/train_dflash.py training loop (trimmed) ---------------------

class TargetStandIn(nn.Module):
    """Frozen target LM stand-in: embeddings, a few layers (for output_hidden_states), tied-free lm_head."""

    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([nn.Linear(config.hidden_size, config.hidden_size)
                                     for _ in range(config.num_target_layers)])
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def get_input_embeddings(self):
        return self.embed_tokens

    def get_output_embeddings(self):
        return self.lm_head

    @torch.no_grad()
    def generate_batch(self, input_ids, loss_mask, target_layer_ids):
        h = self.embed_tokens(input_ids)
        hidden_states = [h]
        for layer in self.layers:
            h = torch.tanh(layer(h))
            hidden_states.append(h)
        return extract_context_feature(hidden_states, target_layer_ids)


def make_batches(num_batches, bsz, seq_len, vocab, generator):
    """Packed-to-seq_len conversations whose supervised (assistant) span varies in length per batch."""
    batches = []
    for i in range(num_batches):
        input_ids = torch.randint(0, vocab - 1, (bsz, seq_len), generator=generator)
        loss_mask = torch.zeros(bsz, seq_len)
        for b in range(bsz):
            span = 4 + int(torch.randint(0, 24, (1,), generator=generator))
            start = int(torch.randint(8, seq_len - span, (1,), generator=generator))
            loss_mask[b, start:start + span] = 1.0
        batches.append(dict(input_ids=input_ids, loss_mask=loss_mask))
    return batches


def main():
    torch.manual_seed(0)
    config = Qwen3Config()
    target_model = TargetStandIn(config).requires_grad_(False)
    draft_model = Qwen3DFlashDraftModel(config)
    mask_token_id = config.vocab_size - 1
    trainer_module = DFlashTrainerModule(
        draft_model=draft_model,
        target_lm_head=target_model.get_output_embeddings(),
        target_embed_tokens=target_model.get_input_embeddings(),
        mask_token_id=mask_token_id,
        block_size=config.block_size,
        attention_backend="flex_attention",
        num_anchors=32,
        loss_decay_gamma=None,
    )
    optimizer = torch.optim.AdamW(draft_model.parameters(), lr=1e-3)
    batches = make_batches(16, 2, 64, config.vocab_size, torch.Generator().manual_seed(1))

    trainer_module.train()
    checksum = 0.0
    for batch in batches:
        hidden_states = target_model.generate_batch(batch["input_ids"], batch["loss_mask"],
                                                    draft_model.target_layer_ids)
        try:
            metrics = trainer_module(
                input_ids=batch["input_ids"],
                hidden_states=hidden_states,
                loss_mask=batch["loss_mask"],
            )
        except NoValidAnchorsError:
            continue
        metrics.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        checksum += metrics.loss.item() + metrics.accuracy.item() + 1e-3 * metrics.valid_tokens.item()

    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {checksum:.4f}")


if __name__ == "__main__":
    main()
