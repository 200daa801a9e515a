"""speculators Eagle3DraftModel.forward after dbd631b1 (#547), reduced to CPU.

Fix: the collate_fn builds document_ids ([1, max_len], fixed shape) on the CPU
data side; the compiled forward receives document_ids instead of lengths.
"""
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import (
    BlockMask,
    and_masks,
    create_block_mask,
    flex_attention,
    or_masks,
)

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- speculators/models/utils.py -------------------------------------------
def conditional_torch_compile(func=None, *args, **kwargs):
    if func is None:
        return lambda f: conditional_torch_compile(f, *args, **kwargs)
    # real: `if torch.cuda.is_available() and hasattr(torch, "compile"):`
    # (CPU run: always compile; counting backend instead of inductor)
    return torch.compile(func, *args, backend=counting_backend, **kwargs)


# ---- speculators/train/data.py (verbatim) ----------------------------------
def slice_and_pad_to_length(tensor, length):
    sliced_tensor = tensor[:length]
    padding = [0, 0] * sliced_tensor.dim()
    padding[-1] = length - sliced_tensor.shape[0]
    return F.pad(sliced_tensor, padding)


def create_collate_fn(max_len, hidden_size, num_target_layers=3, dtype=torch.float32, preprocess=None):
    def collate_fn(batch):
        batch = [preprocess(b) if preprocess else b for b in batch if b is not None]

        collated_data = {}
        for key in batch[0]:  # type: ignore[union-attr]
            # Concatenate the tensors along the seq (0th) dimension
            collated_data[key] = torch.cat([b[key] for b in batch], dim=0)  # type: ignore[index]
            # shape: [total_seq_len, ...]

            if key != "lengths":
                # Slice and pad on seq (0th) dimension to max_len
                collated_data[key] = slice_and_pad_to_length(
                    collated_data[key], max_len
                ).unsqueeze(0)
                # shape: [1, max_len, ...]

        # Include lengths until while they fit in max_len
        # The last included length is (if necessary) truncated
        # Any additional lengths are discarded
        lengths = collated_data.pop("lengths")
        new_lengths = []
        cum_length = 0
        for length in lengths:
            if length + cum_length >= max_len:
                new_lengths.append(max_len - cum_length)
                break
            new_lengths.append(length)
            cum_length += length
        lengths = torch.tensor(new_lengths, dtype=torch.long)

        # Create document_ids: maps each position to its document index, -1 for padding
        document_ids = torch.repeat_interleave(
            torch.arange(lengths.shape[0], dtype=torch.long), lengths
        )
        document_ids = torch.cat(
            [
                document_ids,
                -1 * torch.ones(max_len - document_ids.shape[0], dtype=torch.long),
            ]
        ).unsqueeze(0)
        # shape: [1, max_len]
        collated_data["document_ids"] = document_ids

        return collated_data

    return collate_fn


# ---- speculators/models/eagle3/attention.py (verbatim) ---------------------
def create_combined_mask_mod(document_ids: torch.Tensor, total_seq_len: int):
    def causal_mask_mod(_b, _h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def document_mask_mod(_b, _h, q_idx, kv_idx):
        # Exclude padding tokens in attention mask
        return torch.logical_and(
            document_ids[q_idx] != -1,
            document_ids[q_idx] == document_ids[kv_idx % total_seq_len],
        )

    def diagonal_draft_mask_mod(_b, _h, q_idx, kv_idx):
        return kv_idx % total_seq_len == q_idx

    return or_masks(
        and_masks(causal_mask_mod, document_mask_mod), diagonal_draft_mask_mod
    )


@torch.compiler.disable
def extend_mask_for_draft_tokens(block_mask):
    kv_num_blocks = block_mask.kv_num_blocks
    kv_indices = block_mask.kv_indices
    b, h, q_blocks, kv_blocks = kv_indices.shape

    # extend kv indices if needed
    kv_indices = torch.cat(
        [kv_indices, kv_indices.new_zeros((b, h, q_blocks, q_blocks))], dim=-1
    )
    new_block_indices = torch.arange(
        kv_blocks,
        kv_blocks + q_blocks,
        dtype=kv_indices.dtype,
        device=kv_indices.device,
    ).reshape(1, 1, q_blocks, 1)
    kv_indices.scatter_(
        dim=-1, index=kv_num_blocks.unsqueeze(-1), src=new_block_indices
    )

    kv_num_blocks = kv_num_blocks + 1
    if block_mask.full_kv_indices is not None:
        extended_full_kv_indices = torch.cat(
            [
                block_mask.full_kv_indices,
                block_mask.full_kv_indices.new_zeros((b, h, q_blocks, q_blocks)),
            ],
            dim=-1,
        )
    else:
        extended_full_kv_indices = None
    return BlockMask.from_kv_blocks(
        kv_num_blocks,
        kv_indices,
        block_mask.full_kv_num_blocks,
        extended_full_kv_indices,
        mask_mod=block_mask.mask_mod,
    )


# ---- speculators/models/attention.py (verbatim) ----------------------------
def flex_attention_forward(module, query, key, value, attention_mask, scaling=None, **_kwargs):
    num_query_heads = query.shape[1]
    num_key_value_heads = key.shape[1]
    enable_gqa = num_query_heads != num_key_value_heads

    query = query.contiguous()
    key = key.contiguous()
    value = value.contiguous()

    flex_attention_output = flex_attention(
        query,
        key,
        value,
        score_mod=None,
        block_mask=attention_mask,
        enable_gqa=enable_gqa,
        scale=scaling,
    )
    attention_output: torch.Tensor = flex_attention_output
    attention_output = attention_output.transpose(1, 2).contiguous()
    return attention_output, None


# ---- stand-ins for transformers pieces (DynamicCache, Llama layers) --------
class DynamicCache:  # stand-in for transformers.DynamicCache
    def __init__(self, config=None):
        self.k, self.v = {}, {}

    def update(self, k, v, layer_idx):
        if layer_idx in self.k:
            k = torch.cat([self.k[layer_idx], k], dim=-2)
            v = torch.cat([self.v[layer_idx], v], dim=-2)
        self.k[layer_idx], self.v[layer_idx] = k, v
        return k, v


class StandInRotary(torch.nn.Module):  # stand-in for LlamaRotaryEmbedding
    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * 0.01
        return freqs.cos(), freqs.sin()


class StandInDecoderLayer(torch.nn.Module):  # stand-in for the Eagle3 Llama layer
    def __init__(self, in_size, hidden_size, layer_idx, heads=2):
        super().__init__()
        self.layer_idx, self.heads, self.hd = layer_idx, heads, hidden_size // heads
        self.q = torch.nn.Linear(in_size, hidden_size, bias=False)
        self.k = torch.nn.Linear(in_size, hidden_size, bias=False)
        self.v = torch.nn.Linear(in_size, hidden_size, bias=False)
        self.o = torch.nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask, position_ids, past_key_values,
                cache_position, position_embeddings, **kwargs):
        b, t, _ = hidden_states.shape
        cos, sin = position_embeddings
        q = (self.q(hidden_states) * cos + sin).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(hidden_states).view(b, t, self.heads, self.hd).transpose(1, 2)
        v = self.v(hidden_states).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = past_key_values.update(k, v, self.layer_idx)
        attn, _ = flex_attention_forward(self, q, k, v, attention_mask)
        return self.o(attn.reshape(b, t, -1))


def kl_div_loss(logits, targets):  # speculators/models/metrics.py, simplified
    return F.kl_div(F.log_softmax(logits, -1), F.softmax(targets, -1), reduction="none").sum(-1)


def compute_metrics(logits, targets, loss_mask, prev_correct, ttt_step, ttt_step_loss_decay, loss_fn=kl_div_loss):
    # simplified eagle3/metrics.py: align_for_step + masked mean loss
    logits = logits[:, :-ttt_step] if ttt_step > 0 else logits
    targets = targets[:, ttt_step:]
    loss_mask = loss_mask[:, ttt_step:]
    loss = (loss_fn(logits, targets) * loss_mask).sum() / (loss_mask.sum() + 1e-5)
    return loss * (ttt_step_loss_decay ** ttt_step), {ttt_step: loss.detach()}


# ---- speculators/models/eagle3/core.py (forward kept verbatim) -------------
class Eagle3DraftModel(torch.nn.Module):
    def __init__(self, hidden_size=32, vocab=64, draft_vocab=64, num_layers=1):
        super().__init__()
        self.hidden_size = hidden_size
        self.embed_tokens = torch.nn.Embedding(vocab, hidden_size)
        self.fc = torch.nn.Linear(3 * hidden_size, hidden_size, bias=False)
        self.layers = torch.nn.ModuleList(
            [StandInDecoderLayer(2 * hidden_size, hidden_size, i) for i in range(num_layers)]
        )
        self.rotary_emb = StandInRotary()
        self.norm = torch.nn.RMSNorm(hidden_size, eps=1e-6)
        self.verifier_norm = torch.nn.RMSNorm(hidden_size, eps=1e-6)
        self.lm_head = torch.nn.Linear(hidden_size, draft_vocab, bias=False)
        self.verifier_lm_head = torch.nn.Linear(hidden_size, draft_vocab, bias=False)
        self.input_norm = None
        self.d2t = None
        self.config = None

    @conditional_torch_compile
    def forward(
        self,
        hidden_states: torch.Tensor,  # shape: [1, total_seq_len, 3 * hidden_size]
        input_ids: torch.Tensor,  # shape: [1, total_seq_len]
        document_ids: torch.Tensor,  # shape: [1, total_seq_len]
        loss_mask: torch.Tensor | None = None,  # shape: [1, total_seq_len]
        position_ids: torch.Tensor | None = None,  # shape: [1, total_seq_len]
        verifier_last_hidden_states: torch.Tensor
        | None = None,  # shape: [1, total_seq_len, hidden_size]
        ttt_steps: int = 3,
        ttt_step_loss_decay: float = 1.0,
        use_off_policy_tokens: bool = False,
        loss_fn=kl_div_loss,
        **kwargs,
    ):
        loss_fn = loss_fn or kl_div_loss
        device = hidden_states.device
        total_seq_len = hidden_states.shape[1]

        if position_ids is None:
            position_ids = 1 + torch.arange(
                total_seq_len, dtype=torch.long, device=device
            ).unsqueeze(0)
            # shape: [1, total_seq_len]

        past_key_values = DynamicCache(config=self.config)

        combined_mask_mod = create_combined_mask_mod(
            document_ids.squeeze(0).to(device), total_seq_len
        )
        # Note: Attention mask is stored as a BlockMask object
        attention_mask = create_block_mask(
            combined_mask_mod,
            B=None,
            H=None,
            Q_LEN=total_seq_len,
            KV_LEN=total_seq_len,
            device=device,
        )

        if self.input_norm is not None:
            hidden_states = self.input_norm(hidden_states)
        hidden_states = self.fc(hidden_states)
        # shape: [1, total_seq_len, hidden_size]

        original_input_ids = input_ids.detach().clone()
        return_loss = verifier_last_hidden_states is not None
        if return_loss:
            with torch.no_grad():
                targets = self.verifier_lm_head(
                    self.verifier_norm(verifier_last_hidden_states)
                )
                # shape: [1, total_seq_len, draft_vocab_size]
            loss = torch.tensor(0.0, device=device)

            prev_correct = (
                loss_mask.clone()
                if loss_mask is not None
                else torch.ones(1, total_seq_len, device=device, dtype=torch.bool)
            )
            metrics = {}

        draft_tokens = []
        for ttt_step in range(ttt_steps):
            with torch.no_grad():
                input_embeds = self.embed_tokens(input_ids)
                # shape: [1, total_seq_len, hidden_size]
            cache_position = torch.arange(
                ttt_step * total_seq_len,
                (ttt_step + 1) * total_seq_len,
                dtype=torch.long,
                device=device,
            )
            # shape: [total_seq_len]

            hidden_states = torch.cat([input_embeds, hidden_states], dim=-1)
            # shape: [1, total_seq_len, 2 * hidden_size]

            position_embeddings = self.rotary_emb(hidden_states, position_ids)

            for decoder_layer in self.layers:
                hidden_states = decoder_layer(
                    hidden_states,
                    attention_mask=attention_mask,
                    position_ids=position_ids,
                    past_key_values=past_key_values,
                    cache_position=cache_position,
                    position_embeddings=position_embeddings,
                    **kwargs,
                )

            logits = self.lm_head(self.norm(hidden_states))
            # shape: [1, total_seq_len, draft_vocab_size]

            if return_loss:
                s_loss, s_metrics = compute_metrics(
                    logits,
                    targets,
                    loss_mask,
                    prev_correct,
                    ttt_step,
                    ttt_step_loss_decay,
                    loss_fn=loss_fn,
                )
                loss += s_loss
                metrics.update(s_metrics)

            input_ids = torch.argmax(logits, dim=-1)
            draft_tokens.append(input_ids.detach().clone())
            if self.d2t is not None:
                input_ids = input_ids + self.d2t[input_ids]  # type: ignore[index]

            if use_off_policy_tokens:
                input_ids = torch.cat(
                    [
                        original_input_ids[:, 1 + ttt_step :],
                        original_input_ids.new_zeros(1, 1 + ttt_step),
                    ],
                    dim=-1,
                )

            attention_mask = extend_mask_for_draft_tokens(attention_mask)
            position_ids = position_ids + 1
            # shape: [1, total_seq_len]

        if return_loss:
            metrics["loss_sum"] = loss.detach().clone()
            metrics["loss_total"] = torch.tensor(1.0, device=device)
            return draft_tokens, loss, metrics
        else:
            return draft_tokens


# ---- driver: Trainer.val_epoch-like loop over packed batches ---------------
H, MAX_LEN = 32, 256
torch.manual_seed(0)


def make_sample(L):
    return {
        "hidden_states": torch.randn(L, 3 * H),
        "input_ids": torch.randint(0, 64, (L,)),
        "verifier_last_hidden_states": torch.randn(L, H),
        "loss_mask": torch.ones(L, dtype=torch.bool),
        "lengths": torch.tensor([L], dtype=torch.long),
        "position_ids": torch.arange(L, dtype=torch.long),
    }


# packed batches: docs per batch vary (2, 3, 1, 4, 2), some fill max_len, some pad
batches = [[100, 200], [90, 80, 60], [300], [50, 50, 50, 50], [120, 60]]
collate_fn = create_collate_fn(MAX_LEN, H)
model = Eagle3DraftModel(hidden_size=H)
val_call_kwargs = {"use_off_policy_tokens": False, "ttt_steps": 3, "ttt_step_loss_decay": 1.0, "loss_fn": kl_div_loss}

checksum = 0.0
model.eval()
# CPU flex_attention has no backward -> the trainer's validation path (no_grad)
with torch.no_grad():
    for lens in batches:
        batch = collate_fn([make_sample(L) for L in lens])
        _draft_tokens, loss, metrics = model(**batch, **val_call_kwargs)
        checksum += float(loss)

print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
