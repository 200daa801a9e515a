"""trl SFTTrainer `loss_type="chunked_nll"` before 00d6209d2 (#6314), reduced to CPU.

`_patch_chunked_ce_lm_head` replaces `model.forward`; the trainer compiles the
model (`torch_compile=True`). `_chunked_cross_entropy_loss` drops the masked
(-100) tokens with `hidden[valid]` (data-dependent size -> graph break) and
then loops `for start in range(0, n_valid, chunk_size)` in the resumed frame:
every batch with another number of completion tokens is a new graph.
"""
import contextlib
import inspect
import types
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- stand-ins for transformers.modeling_outputs ----------------------------
@dataclass
class BaseModelOutputWithPast:
    last_hidden_state: torch.Tensor = None
    past_key_values: object = None
    hidden_states: object = None
    attentions: object = None


@dataclass
class CausalLMOutputWithPast:
    loss: torch.Tensor = None
    logits: torch.Tensor = None
    past_key_values: object = None
    hidden_states: object = None
    attentions: object = None


# ---- trl/trainer/sft_trainer.py (verbatim unless noted) ---------------------
_CHUNKED_LM_HEAD_CHUNK_SIZE = 256


@dataclass
class _ChunkedCELMHeadOutput(CausalLMOutputWithPast):
    """`CausalLMOutputWithPast` with extra fields populated by the chunked-CE path."""

    num_correct_tokens: torch.Tensor | None = None
    entropy_sum: torch.Tensor | None = None
    num_valid_tokens: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None


def _maybe_gather_lm_head_ctx(w, b):
    # (ZeRO-3 gather; not ZeRO-3 here -> no-op, as in the real function)
    return contextlib.nullcontext()


def _chunk(h, w, b, lbl, logit_scale, final_logit_softcapping):
    with _maybe_gather_lm_head_ctx(w, b):
        logits = h.float() @ w.float().t()
        if b is not None:
            logits = logits + b.float()
    if logit_scale != 1.0:
        logits = logits * logit_scale
    if final_logit_softcapping is not None:
        logits = final_logit_softcapping * torch.tanh(logits / final_logit_softcapping)
    log_p = F.log_softmax(logits, dim=-1)
    chunk_loss = F.nll_loss(log_p, lbl, reduction="sum")
    chunk_correct = (logits.argmax(dim=-1) == lbl).sum().float()
    chunk_entropy = -(log_p.exp() * log_p).sum(dim=-1).sum()
    return chunk_loss, chunk_correct, chunk_entropy


def _chunked_cross_entropy_loss(
    hidden_states: torch.Tensor,
    lm_head_weight: torch.Tensor,
    chunk_size: int,
    labels: torch.Tensor | None = None,
    shift_labels: torch.Tensor | None = None,
    num_items_in_batch: torch.Tensor | int | None = None,
    logit_scale: float = 1.0,
    final_logit_softcapping: float | None = None,
    lm_head_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    if labels is None and shift_labels is None:
        raise ValueError("At least one of `labels` or `shift_labels` must be provided.")

    if shift_labels is not None:
        hidden = hidden_states.reshape(-1, hidden_states.size(-1))
        labels = shift_labels.reshape(-1)
    else:
        hidden = hidden_states[..., :-1, :].reshape(-1, hidden_states.size(-1))
        labels = labels[..., 1:].reshape(-1)

    valid = labels != -100
    hidden = hidden[valid]
    labels = labels[valid]
    n_valid = hidden.size(0)

    correct = hidden.new_zeros((), dtype=torch.float32)
    entropy_sum = hidden.new_zeros((), dtype=torch.float32)
    n_valid_tensor = torch.tensor(n_valid, device=hidden.device, dtype=torch.long)
    if n_valid == 0:
        # Whole micro-batch masked (e.g. completion-only loss + truncation). Keep the loss connected
        # to the autograd graph through every trainable parameter so `.backward()` succeeds and DDP /
        # FSDP gradient sync doesn't hang on a missing param.
        with _maybe_gather_lm_head_ctx(lm_head_weight, lm_head_bias):
            loss = (hidden_states.float().sum() + lm_head_weight.float().sum()) * 0.0
            if lm_head_bias is not None:
                loss = loss + lm_head_bias.float().sum() * 0.0
        return loss, correct, entropy_sum, n_valid_tensor

    loss = hidden.new_zeros((), dtype=torch.float32)

    for start in range(0, n_valid, chunk_size):
        h_chunk = hidden[start : start + chunk_size]
        lbl_chunk = labels[start : start + chunk_size]
        chunk_loss, chunk_correct, chunk_entropy = torch.utils.checkpoint.checkpoint(
            _chunk,
            h_chunk,
            lm_head_weight,
            lm_head_bias,
            lbl_chunk,
            logit_scale,
            final_logit_softcapping,
            use_reentrant=False,
        )
        loss = loss + chunk_loss
        correct = correct + chunk_correct
        entropy_sum = entropy_sum + chunk_entropy

    if num_items_in_batch is None:
        loss = loss / n_valid
    else:
        if isinstance(num_items_in_batch, torch.Tensor):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        loss = loss / num_items_in_batch
    return loss, correct, entropy_sum, n_valid_tensor


def _patch_chunked_ce_lm_head(model: torch.nn.Module, chunk_size: int, is_vlm: bool = False) -> None:
    # VLM scaling configs (`logit_scale`, `final_logit_softcapping`, MoE `output_router_logits`) live on `text_config`;
    # text-only models keep them on the top-level config.
    text_config = model.config.text_config if is_vlm else model.config
    final_logit_softcapping = getattr(text_config, "final_logit_softcapping", None)
    logit_scale = getattr(text_config, "logit_scale", 1.0)
    original_forward = model.forward
    lm_head = model.get_output_embeddings()

    def _chunked_ce_forward(
        self: torch.nn.Module,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        shift_labels: torch.Tensor | None = None,
        output_router_logits: bool | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        if labels is None and shift_labels is None:
            if output_router_logits is not None:
                kwargs["output_router_logits"] = output_router_logits
            return original_forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

        if output_router_logits is None:
            output_router_logits = getattr(text_config, "output_router_logits", False)

        kwargs.pop("use_cache", None)
        decoder_kwargs = {}
        if output_router_logits:
            decoder_kwargs["output_router_logits"] = True
        # (transformers >= 5: `self.base_model` is the backbone)
        backbone = self.base_model
        outputs: BaseModelOutputWithPast = backbone(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **decoder_kwargs, **kwargs
        )
        hidden_states = outputs.last_hidden_state

        lm_head_weight = lm_head.weight
        lm_head_bias = lm_head.bias
        # (FSDP2 DTensor `full_tensor()` branch dropped: single process)
        loss, num_correct_tokens, entropy_sum, num_valid_tokens = _chunked_cross_entropy_loss(
            hidden_states,
            lm_head_weight,
            chunk_size,
            labels=labels,
            shift_labels=shift_labels,
            num_items_in_batch=num_items_in_batch,
            logit_scale=logit_scale,
            final_logit_softcapping=final_logit_softcapping,
            lm_head_bias=lm_head_bias,
        )

        aux_loss = None
        # (MoE load-balancing branch dropped: dense model, output_router_logits False)

        return _ChunkedCELMHeadOutput(
            loss=loss,
            logits=None,
            past_key_values=outputs.past_key_values,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            num_correct_tokens=num_correct_tokens,
            entropy_sum=entropy_sum,
            num_valid_tokens=num_valid_tokens,
            aux_loss=aux_loss,
        )

    _chunked_ce_forward.__signature__ = inspect.signature(original_forward.__func__)
    model.forward = types.MethodType(_chunked_ce_forward, model)


# ---- stand-in causal LM (a LlamaForCausalLM in miniature) -------------------
class TinyDecoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.SiLU(), nn.Linear(2 * hidden, hidden))
        self.norm = nn.RMSNorm(hidden)

    def forward(self, input_ids=None, attention_mask=None, use_cache=False, **kwargs):
        h = self.embed_tokens(input_ids)
        h = h + self.mlp(h) * attention_mask.unsqueeze(-1)
        return BaseModelOutputWithPast(last_hidden_state=self.norm(h))


class TinyForCausalLM(nn.Module):
    base_model_prefix = "model"

    def __init__(self, vocab=128, hidden=32):
        super().__init__()
        self.config = SimpleNamespace(final_logit_softcapping=None, logit_scale=1.0, output_router_logits=False)
        self.model = TinyDecoder(vocab, hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    @property
    def base_model(self):
        return getattr(self, self.base_model_prefix, self)

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids=None, attention_mask=None, labels=None, use_cache=None, **kwargs):
        h = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return CausalLMOutputWithPast(logits=self.lm_head(h))


# ---- driver: SFTTrainer(loss_type="chunked_nll", torch_compile=True) --------
# completion-only loss: prompt tokens are -100; batches padded to max_length
# (static shapes, as Trainium needs); the completion length differs per batch.
torch.manual_seed(0)
B, S, V = 4, 512, 128
model = TinyForCausalLM(vocab=V)
_patch_chunked_ce_lm_head(model, chunk_size=_CHUNKED_LM_HEAD_CHUNK_SIZE)
compiled = torch.compile(model, backend=counting_backend)  # Trainer: args.torch_compile
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

checksum = 0.0
for step, prompt_frac in enumerate([0.5, 0.3, 0.9, 0.7, 0.45, 0.2, 0.6, 0.8, 0.35, 0.55]):
    input_ids = torch.randint(0, V, (B, S))
    attention_mask = torch.ones(B, S, dtype=torch.long)
    labels = input_ids.clone()
    labels[:, : int(S * prompt_frac)] = -100  # prompt tokens (completion_only_loss)
    pad = (step % 3) * 16
    if pad:
        labels[:, S - pad :] = -100  # right padding of the shorter examples
    outputs = compiled(input_ids=input_ids, attention_mask=attention_mask, labels=labels, use_cache=False)
    loss = outputs.loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    # SFTTrainer.compute_loss metrics for chunked_nll
    num_valid = outputs.num_valid_tokens.sum()
    entropy = (outputs.entropy_sum / num_valid).item() if num_valid > 0 else 0.0
    accuracy = (outputs.num_correct_tokens / num_valid).item() if num_valid > 0 else 0.0
    checksum += float(loss) + entropy + accuracy

print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
