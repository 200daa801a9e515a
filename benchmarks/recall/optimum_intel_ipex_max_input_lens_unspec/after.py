# Reproduction of huggingface/optimum-intel IPEXModelForCausalLM AFTER a05fb557 ("Fix int value recompile
# (#1335)"): for patched text-generation models `IPEXModel.apply_torch_compile` now sets
# `torch._dynamo.config.allow_unspec_int_on_nn_module = True` ("To avoid int value recompile.").
# Before it, `prepare_page_attn_inputs` stored the current max sequence length as a Python int in
# `self.model.config.max_input_lens` and the compiled `self.model.forward` read it as `self.config.max_input_lens`;
# Dynamo reaches that int through `self` (an nn.Module), and ints sourced from nn modules are specialized unless
# `allow_unspec_int_on_nn_module` is set, so every decode step (max_input_lens grows by one) failed
# `self.config.max_input_lens == N` and recompiled, until the recompile limit was hit.
# Code (a05fb557): optimum/intel/ipex/modeling_base.py (IPEXModel.__init__/can_compile/apply_torch_compile,
# IPEXModelForCausalLM.forward/prepare_page_attn_inputs/preprocess_/postprocess_ipex_paged_cache),
# optimum/exporters/ipex/modeling_utils.py (_llama_model_forward, _ipex_rms_layer_norm_forward, _IPEXAttention,
# _IPEXLlamaAttention, _IPEXLlamaMLP, _IPEXLlamaDecoderLayer), optimum/exporters/ipex/cache_utils.py
# (IPEXPagedCache), optimum/exporters/ipex/model_patcher.py (_patch_llama_model),
# optimum/intel/utils/modeling_utils.py (_setattr_from_module); HF transformers 4.51 Llama modules (reduced).
# Stand-ins: the IPEX CPU kernels (PagedAttention.reshape_and_cache / flash_attn_varlen_func,
# RotaryEmbedding.apply_function, RMSNorm.apply_function) are CPU torch.library custom ops with the same
# arguments (opaque to Dynamo, like IPEX's torch.ops.torch_ipex ops); GenerationMixin.generate is a plain
# greedy loop that builds the same model inputs.
import math
import os
from typing import List, Optional, Tuple, Union

import torch
from torch import nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- IPEX CPU kernels (stand-ins) ------------------------------------------------------------------------
@torch.library.custom_op("ipex_standin::rmsnorm", mutates_args=())
def _ipex_rmsnorm(hidden_states: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
    return weight * (hidden_states.float() * torch.rsqrt(variance + eps)).to(hidden_states.dtype)


@_ipex_rmsnorm.register_fake
def _(hidden_states, weight, eps):
    return torch.empty_like(hidden_states)


@torch.library.custom_op("ipex_standin::rotary_embedding", mutates_args=("query", "key"))
def _ipex_rotary_embedding(query: torch.Tensor, key: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor,
                           rotary_dim: int, rotary_half: bool) -> None:
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    q, k = query.clone(), key.clone()
    query.copy_(q * cos + rotate_half(q) * sin)
    key.copy_(k * cos + rotate_half(k) * sin)


@torch.library.custom_op("ipex_standin::reshape_and_cache", mutates_args=("key_cache", "value_cache"))
def _ipex_reshape_and_cache(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                            value_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    block_size = key_cache.shape[2]
    for t, slot in enumerate(slot_mapping[: key.shape[0]].tolist()):
        key_cache[slot // block_size, :, slot % block_size] = key[t]
        value_cache[slot // block_size, :, slot % block_size] = value[t]


@torch.library.custom_op("ipex_standin::flash_attn_varlen", mutates_args=("output",))
def _ipex_flash_attn_varlen(output: torch.Tensor, query: torch.Tensor, key_cache: torch.Tensor,
                            value_cache: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_kv: torch.Tensor,
                            max_seqlen_q: int, max_seqlen_kv: int, scale: float, is_causal: bool,
                            block_table: torch.Tensor) -> None:
    block_size = key_cache.shape[2]
    n_rep = query.shape[1] // key_cache.shape[1]
    cu_q, cu_kv = cu_seqlens_q.tolist(), cu_seqlens_kv.tolist()
    for i in range(len(cu_q) - 1):
        q = query[cu_q[i] : cu_q[i + 1]]  # (q_len, H, D)
        kv_len = cu_kv[i + 1] - cu_kv[i]
        pos = torch.arange(kv_len)
        blocks = block_table[i][pos // block_size]
        k = key_cache[blocks, :, pos % block_size].repeat_interleave(n_rep, 1)  # (kv_len, H, D)
        v = value_cache[blocks, :, pos % block_size].repeat_interleave(n_rep, 1)
        scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * scale
        if is_causal:
            q_pos = torch.arange(kv_len - q.shape[0], kv_len)
            scores = scores.masked_fill(pos[None, :] > q_pos[:, None], float("-inf"))
        output[cu_q[i] : cu_q[i + 1]] = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v.float()).to(output.dtype)


class RMSNorm:
    @staticmethod
    def apply_function(hidden_states, weight, eps):
        return _ipex_rmsnorm(hidden_states, weight, eps)


class RotaryEmbedding:
    @staticmethod
    def apply_function(query, key, sin, cos, rotary_dim, rotary_half):
        _ipex_rotary_embedding(query, key, sin, cos, rotary_dim, rotary_half)
        return query, key


class PagedAttention:
    @staticmethod
    def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping):
        _ipex_reshape_and_cache(key, value, key_cache, value_cache, slot_mapping)

    @staticmethod
    def flash_attn_varlen_func(output, query, key_cache, value_cache, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q,
                               max_seqlen_kv, scale, is_causal, block_table, alibi_slopes=None):
        _ipex_flash_attn_varlen(output, query, key_cache, value_cache, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q,
                                max_seqlen_kv, scale, is_causal, block_table)


def is_torch_version(op, version):
    return True  # torch 2.13 > 2.4.99


# ---- transformers 4.51 (reduced) --------------------------------------------------------------------------
class ModelOutput(dict):
    def __getattr__(self, name):
        return self.get(name)


class BaseModelOutputWithPast(ModelOutput):
    pass


class CausalLMOutputWithPast(ModelOutput):
    pass


class Cache:
    pass


class LlamaConfig:
    model_type = "llama"

    def __init__(self, **kwargs):
        self.output_attentions = False
        self.output_hidden_states = False
        self.use_cache = True
        self.use_return_dict = True
        self.rope_theta = 10000.0
        self.rms_norm_eps = 1e-6
        self.__dict__.update(kwargs)


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        dim = config.hidden_size // config.num_attention_heads
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1).to(x.device)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class LlamaAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(config.num_attention_heads * self.head_dim, config.hidden_size, bias=False)


class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.act_fn = nn.SiLU()


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.self_attn = LlamaAttention(config, layer_idx)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)


class LlamaModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    @property
    def device(self):
        return self.lm_head.weight.device

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                inputs_embeds=None, labels=None, use_cache=None, output_attentions=None, output_hidden_states=None,
                cache_position=None, logits_to_keep=0, **kwargs):
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            cache_position=cache_position,
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state
        slice_indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.lm_head(hidden_states[:, slice_indices, :])
        return CausalLMOutputWithPast(
            loss=None,
            logits=logits,
            past_key_values=outputs.past_key_values,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


# ---- optimum/intel/utils/modeling_utils.py ----------------------------------------------------------------
def _setattr_from_module(new_module, module):
    for k, v in module.__dict__.items():
        setattr(new_module, k, v)
    for k, v in module.__class__.__dict__.items():
        if k.startswith("__") or k.startswith("forward"):
            continue
        setattr(new_module.__class__, k, getattr(module.__class__, k))


# ---- optimum/exporters/ipex/cache_utils.py -------------------------------------------------------------------
class IPEXPagedCache(Cache):
    def __init__(
        self,
        config,
        max_batch_size: int,
        max_cache_len: int,
        device=None,
        dtype=None,
        **kwargs,
    ) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        default_device = torch.device("cpu")
        device = device or default_device
        self.device = device
        self._supports_flash_decoding = True
        # Used in `generate` to keep tally of how many tokens the cache has seen

        self._seen_tokens = torch.zeros([max_batch_size], dtype=torch.int32, device=device)
        self.slots = torch.zeros([max_cache_len * max_batch_size], dtype=torch.int32, device=device)
        torch._dynamo.mark_static_address(self._seen_tokens)
        torch._dynamo.mark_static_address(self.slots)
        default_block_size = 16 if max_cache_len <= 64 else 64
        self.block_size = int(os.environ.get("OI_PAGED_ATTN_BLOCK_SIZE", str(default_block_size)))
        self.num_blocks = (max_cache_len // self.block_size + (max_cache_len % self.block_size != 0)) * max_batch_size
        self.block_tables = -1 * torch.ones([self.num_blocks], dtype=torch.int32, device=device).reshape(
            max_batch_size, -1
        )
        self.free_blocks = torch.ones([self.num_blocks], dtype=torch.int32, device=device)
        self.max_cache_len = max_cache_len
        self.num_kv_heads = config.num_key_value_heads
        self.num_hidden_layers = config.num_hidden_layers
        if hasattr(config, "head_dim"):
            head_size = config.head_dim
        else:
            head_size = config.hidden_size // config.num_attention_heads
        self.head_size = head_size

        self.key_cache: List[torch.Tensor] = []
        self.value_cache: List[torch.Tensor] = []

        key_cache_shape = (self.num_blocks, self.num_kv_heads, self.block_size, head_size)
        value_cache_shape = (self.num_blocks, self.num_kv_heads, self.block_size, head_size)
        for i in range(config.num_hidden_layers):
            new_layer_key_cache = torch.zeros(key_cache_shape, dtype=dtype, device=device)
            new_layer_value_cache = torch.zeros(value_cache_shape, dtype=dtype, device=device)
            torch._dynamo.mark_static_address(new_layer_key_cache)
            torch._dynamo.mark_static_address(new_layer_value_cache)
            self.key_cache.append(new_layer_key_cache)
            self.value_cache.append(new_layer_value_cache)

    def reshape_and_cache(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        slots: torch.Tensor,
    ):
        PagedAttention.reshape_and_cache(
            key,
            value,
            key_cache,
            value_cache,
            slots,
        )

    # outside the model forward
    def alloc_slot_for_prefill(self, input_lens: torch.Tensor, batch_size: int):
        all_block_indices = []
        all_slot_offsets = []
        num_blocks = (input_lens + self.block_size - 1) // self.block_size
        for i in range(batch_size):
            nb = num_blocks[i]
            scores = self.free_blocks * torch.arange(self.free_blocks.shape[0], 0, -1, device=self.device)
            block_table = torch.topk(scores, nb).indices
            self.block_tables[i][0:nb] = block_table
            self.free_blocks[block_table] = 0
            slots_range = torch.arange(input_lens[i], device=self.device)
            block_indices = slots_range // self.block_size
            slot_offsets = slots_range % self.block_size
            all_block_indices.append(self.block_tables[i][block_indices])
            all_slot_offsets.append(slot_offsets)

        all_block_indices = torch.cat(all_block_indices)
        all_slot_offsets = torch.cat(all_slot_offsets).int()
        # Use inplace op to keep the same memory address, avoid recompile
        self.slots[: all_block_indices.shape[0]].copy_(all_block_indices * self.block_size + all_slot_offsets)

    # outside the model forward
    def alloc_slot_for_decode(self, batch_size: int):
        start_block_idx = self._seen_tokens // self.block_size
        slot_offset_in_block = (self._seen_tokens) % self.block_size
        # Use inplace op to keep the same memory address, avoid recompile
        self.slots.zero_()
        for i in range(batch_size):
            if slot_offset_in_block[i] == 0:
                # need a new block:
                b_idx = start_block_idx[i]
                if self.block_tables[i][b_idx] == -1:
                    # Need a free block. Get indices of free blocks, select the first free block
                    scores = self.free_blocks * torch.arange(self.free_blocks.shape[0], 0, -1, device=self.device)
                    self.block_tables[i][b_idx] = scores.argmax()
                    self.free_blocks[self.block_tables[i][b_idx]] = 0
            self.slots[i] = self.block_tables[i][start_block_idx[i]] * self.block_size + slot_offset_in_block[i]

    def update(
        self,
        key_states: torch.Tensor,
        value_states: torch.Tensor,
        layer_idx: int,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        self.reshape_and_cache(
            key_states, value_states, self.key_cache[layer_idx], self.value_cache[layer_idx], self.slots
        )

        return self.key_cache[layer_idx], self.value_cache[layer_idx]

    def get_seq_length(self) -> int:
        """Returns the sequence length of the cached states that were seen by the model."""
        return self._seen_tokens.max()


# ---- optimum/exporters/ipex/modeling_utils.py ----------------------------------------------------------------
def _ipex_rms_layer_norm_forward(self, hidden_states):
    return RMSNorm.apply_function(hidden_states, self.weight, self.variance_epsilon)


def _llama_model_forward(
    self,
    input_ids: torch.LongTensor = None,
    attention_mask: Optional[torch.Tensor] = None,
    position_ids: Optional[torch.LongTensor] = None,
    past_key_values: Optional[Union[Cache, List[torch.FloatTensor]]] = None,
    inputs_embeds: Optional[torch.FloatTensor] = None,
    use_cache: Optional[bool] = None,
    output_attentions: Optional[bool] = None,
    output_hidden_states: Optional[bool] = None,
    return_dict: Optional[bool] = None,
    **kwargs,
) -> Union[Tuple, BaseModelOutputWithPast]:
    output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
    output_hidden_states = (
        output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
    )
    use_cache = use_cache if use_cache is not None else self.config.use_cache

    return_dict = return_dict if return_dict is not None else self.config.use_return_dict

    # retrieve input_ids and inputs_embeds
    if input_ids is not None and inputs_embeds is not None:
        raise ValueError("You cannot specify both input_ids and inputs_embeds at the same time")
    elif input_ids is not None:
        batch_size, seq_length = input_ids.shape[:2]
    elif inputs_embeds is not None:
        batch_size, seq_length = inputs_embeds.shape[:2]
    else:
        raise ValueError("You have to specify either input_ids or inputs_embeds")

    if past_key_values is not None and not isinstance(past_key_values, IPEXPagedCache):
        raise ValueError("only support IPEXPagedCache input now")

    max_input_lens = self.config.max_input_lens
    past_key_values_length = max_input_lens - seq_length

    device = input_ids.device if input_ids is not None else inputs_embeds.device
    if position_ids is None:
        position_ids = torch.arange(past_key_values_length, max_input_lens, dtype=torch.long, device=device)
        position_ids = position_ids.unsqueeze(0).repeat_interleave(input_ids.shape[0], 0)

    if inputs_embeds is None:
        inputs_embeds = self.embed_tokens(input_ids)

    # embed positions
    hidden_states = inputs_embeds

    # decoder layers
    all_hidden_states = () if output_hidden_states else None
    all_self_attns = () if output_attentions else None
    next_decoder_cache = () if use_cache else None

    position_embeddings = self.rotary_emb(hidden_states, position_ids)

    index = kwargs.pop("index", None)
    cos = position_embeddings[0]
    sin = position_embeddings[1]

    hidden_states_copy = hidden_states
    hidden_states = (hidden_states.view(-1, hidden_states.shape[-1])).index_select(0, index)
    cos = (cos.reshape(-1, cos.shape[-1])).index_select(0, index)
    sin = (sin.reshape(-1, sin.shape[-1])).index_select(0, index)
    position_embeddings = (cos.unsqueeze(1), sin.unsqueeze(1))

    if past_key_values is None:
        raise NotImplementedError("no-cache path (SDPA mask) trimmed from the reproduction")

    for idx, decoder_layer in enumerate(self.layers):
        if output_hidden_states:
            all_hidden_states += (hidden_states,)

        layer_outputs = decoder_layer(
            hidden_states,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_value=past_key_values,
            output_attentions=output_attentions,
            use_cache=use_cache,
            position_embeddings=position_embeddings,
            past_key_values_length=past_key_values_length,
            max_input_lens=self.config.max_input_lens,
            query_max_len=seq_length,
            **kwargs,
        )

        hidden_states = layer_outputs[0]

        if use_cache:
            next_decoder_cache = layer_outputs[2 if output_attentions else 1]

        if output_attentions:
            all_self_attns += (layer_outputs[1],)

    hidden_states = self.norm(hidden_states)

    # add hidden states from the last decoder layer
    if output_hidden_states:
        all_hidden_states += (hidden_states,)

    next_cache = next_decoder_cache if use_cache else None
    if hidden_states.shape[0] != batch_size * seq_length:
        (hidden_states_copy.view(-1, hidden_states.shape[-1]))[attention_mask.view(-1) != 0] = hidden_states
        hidden_states = hidden_states_copy
    hidden_states = hidden_states.view(batch_size, -1, hidden_states.shape[-1])
    if not return_dict:
        return tuple(v for v in [hidden_states, next_cache, all_hidden_states, all_self_attns] if v is not None)
    return BaseModelOutputWithPast(
        last_hidden_state=hidden_states,
        past_key_values=next_cache,
        hidden_states=all_hidden_states,
        attentions=all_self_attns,
    )


class _IPEXAttention(nn.Module):
    def __init__(self, module, device, config) -> None:
        super().__init__()
        _setattr_from_module(self, module)
        self.config = config
        self.module_device = device
        self.num_key_value_heads = config.num_key_value_heads
        self.num_attention_heads = config.num_attention_heads
        self.num_groups = self.num_attention_heads // self.num_key_value_heads
        self.kv_head_mapping = torch.arange(
            0, self.num_key_value_heads, dtype=torch.int32, device=self.module_device
        ).repeat_interleave(self.num_groups)
        self.use_sdpa = False

    def qkv_gemm(self, hidden_states):
        raise NotImplementedError("Need to implement in specific model class")

    def rope(self, query, key, **kwargs):
        position_embeddings = kwargs.pop("position_embeddings", None)
        RotaryEmbedding.apply_function(
            query, key, position_embeddings[1], position_embeddings[0], query.size(-1), True
        )
        return query, key

    def postprocess_attention_output(self, attn_output):
        if self.use_sdpa:
            attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(-1, attn_output.shape[-2] * attn_output.shape[-1])
        return attn_output

    # Maybe removed after torch 2.6 released
    def has_flash_attn(self):
        if self.module_device.type == "cpu":
            return is_torch_version(">", "2.4.99")
        elif self.module_device.type == "xpu":
            return is_torch_version(">", "2.5.99")

    def attention_interface(
        self,
        query,
        key_cache,
        value_cache,
        key,
        value,
        past_key_value,
        attention_mask,
        input_lens,
        past_key_values_length,
        seq_len_tensor,
        query_len_tensor,
        max_input_lens,
        query_max_len,
    ):
        if past_key_value is None:
            raise NotImplementedError("no-cache SDPA path trimmed from the reproduction")
        elif self.has_flash_attn():
            attn_output = torch.empty_like(query)
            PagedAttention.flash_attn_varlen_func(
                attn_output,
                query.contiguous() if query.device.type == "xpu" else query,
                key_cache,
                value_cache,
                query_len_tensor,
                seq_len_tensor,
                query_max_len,
                max_input_lens,
                1.0 / math.sqrt(self.head_dim),
                True,
                past_key_value.block_tables,
                None,
            )
        else:
            raise NotImplementedError("pre-2.5 torch paths (varlen_attention / single_query_cached_kv_attention) trimmed")

        return attn_output

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        past_key_value: Optional[IPEXPagedCache] = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[Tuple[torch.Tensor]]]:
        if past_key_value is None and kwargs.get("layer_past", None) is not None:
            past_key_value = kwargs.pop("layer_past", None)
        input_lens = kwargs.pop("input_lens", None)
        seq_len_tensor = kwargs.pop("seq_len_tensor", None)
        query_len_tensor = kwargs.pop("query_len_tensor", None)
        max_input_lens = kwargs.pop("max_input_lens", 0)
        query_max_len = kwargs.pop("query_max_len", 0)
        past_key_values_length = kwargs.pop("past_key_values_length", 0)
        query, key, value = self.qkv_gemm(hidden_states)
        query, key = self.rope(query, key, **kwargs)

        key_cache, value_cache = None, None
        if past_key_value is not None:
            key_cache, value_cache = past_key_value.update(key, value, self.layer_idx)

        attn_output = self.attention_interface(
            query,
            key_cache,
            value_cache,
            key,
            value,
            past_key_value,
            attention_mask,
            input_lens,
            past_key_values_length,
            seq_len_tensor,
            query_len_tensor,
            max_input_lens,
            query_max_len,
        )

        attn_output = self.postprocess_attention_output(attn_output)
        if not output_attentions:
            attn_weights = None

        return attn_output, past_key_value, attn_weights


class _IPEXLlamaAttention(_IPEXAttention):
    def __init__(self, module, device, config) -> None:
        super().__init__(module, device, config)
        if getattr(config, "quantization_config", None) is None:
            concat_weight = torch.concat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]).contiguous()
            bias_list = [bias for bias in [self.q_proj.bias, self.k_proj.bias, self.v_proj.bias] if bias is not None]
            use_bias = bias_list != []
            self.concat_qkv = nn.Linear(concat_weight.shape[1], concat_weight.shape[0], bias=use_bias)
            self.concat_qkv.weight = nn.Parameter(concat_weight)
            if use_bias:
                concat_bias = torch.concat(bias_list, 0).contiguous()
                self.concat_qkv.bias = nn.Parameter(concat_bias)
            self.q_slice = self.q_proj.weight.shape[0]
            self.k_slice = self.q_slice + self.k_proj.weight.shape[0]
            self.v_slice = self.k_slice + self.v_proj.weight.shape[0]

            if not config.compile and module.o_proj.__class__.__name__ not in ["LinearAllreduce"]:
                raise NotImplementedError("IPEX LinearAdd fusion (non-compile path) trimmed")

    def qkv_gemm(self, hidden_states):
        if hasattr(self, "concat_qkv"):
            qkv_out = self.concat_qkv(hidden_states)
            query = qkv_out[:, : self.q_slice].view(-1, self.num_attention_heads, self.head_dim)
            key = qkv_out[:, self.q_slice : self.k_slice].view(-1, self.num_key_value_heads, self.head_dim)
            value = qkv_out[:, self.k_slice :].view(-1, self.num_key_value_heads, self.head_dim)
        else:
            query = self.q_proj(hidden_states).view(-1, self.num_attention_heads, self.head_dim)
            key = self.k_proj(hidden_states).view(-1, self.num_key_value_heads, self.head_dim)
            value = self.v_proj(hidden_states).view(-1, self.num_key_value_heads, self.head_dim)

        return query, key, value


class _IPEXLlamaMLP(nn.Module):
    def __init__(self, module, device, config) -> None:
        super().__init__()
        _setattr_from_module(self, module)
        self.config = config
        self.module_device = device

        if not config.compile and getattr(config, "quantization_config", None) is None:
            raise NotImplementedError("IPEX LinearAdd / Linear2SiluMul fusion (non-compile path) trimmed")

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor = None, **kwargs):
        if hasattr(self, "linear_silu_mul"):
            mlp_gate = self.linear_silu_mul(hidden_states)
            if hasattr(self, "mlp_linear_add"):
                hidden_states = self.mlp_linear_add(mlp_gate, residual)
            else:
                hidden_states = self.down_proj(mlp_gate)
                hidden_states = residual + hidden_states
        else:
            hidden_states = self.down_proj(self.act_fn(self.gate_proj(hidden_states)) * self.up_proj(hidden_states))
            hidden_states = residual + hidden_states

        return hidden_states


class _IPEXLlamaDecoderLayer(nn.Module):
    def __init__(self, module, device, config):
        super().__init__()
        _setattr_from_module(self, module)
        self.self_attn = _IPEXLlamaAttention(module.self_attn, device, config)
        self.mlp = _IPEXLlamaMLP(module.mlp, device, config)

    def forward(self, hidden_states: torch.Tensor, **kwargs):
        # Please see the original model's forward to check the parameter
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        # Self Attention
        hidden_states, present, attn_weights = self.self_attn(hidden_states=hidden_states, **kwargs)

        if hasattr(self.self_attn, "mha_linear_add"):
            hidden_states = self.self_attn.mha_linear_add(hidden_states, residual)
        else:
            hidden_states = self.self_attn.o_proj(hidden_states)
            hidden_states = residual + hidden_states
        # Fully Connected
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states, residual, **kwargs)

        outputs = (hidden_states,)
        if kwargs.get("output_attentions", False):
            outputs += (attn_weights,)
        if kwargs.get("use_cache", False):
            outputs += (present,)

        return outputs


# ---- optimum/exporters/ipex/model_patcher.py (llama only) ------------------------------------------------------
def _patch_llama_model(model):
    """
    Patch llama model:
        1. Use IPEX rope and paged cache
        2. Linear fusion with (2 Linears + Silu + Mul) and (Linear + Add)
    """
    for m in model.modules():  # convert_functions(model, LlamaModel, "forward", _llama_model_forward)
        if isinstance(m, LlamaModel):
            m.forward = _llama_model_forward.__get__(m)
        if isinstance(m, LlamaRMSNorm):  # convert_functions(model, LlamaRMSNorm, "forward", ...)
            m.forward = _ipex_rms_layer_norm_forward.__get__(m)
    # convert_class(model, LlamaDecoderLayer, _IPEXLlamaDecoderLayer, model.device, model.config)
    layers = model.model.layers
    for i, layer in enumerate(layers):
        layers[i] = _IPEXLlamaDecoderLayer(layer, model.device, model.config)
    return model


# ---- optimum/intel/ipex/modeling_base.py ------------------------------------------------------------------------
class IPEXModel:
    export_feature = "feature-extraction"

    def __init__(self, model, config=None, model_save_dir=None, **kwargs):
        config = config or model.config
        self.model = model
        self.config = config
        self._dtype = torch.float32
        self.use_cache = kwargs.get("use_cache", False)
        self._add_patch = True  # _is_patched_with_ipex(model, self.export_feature, self.use_cache): llama + cache
        self.model.config.compile = self.can_compile()

        if self._add_patch:
            model = _patch_llama_model(model)

        if getattr(self.model.config, "compile", False):
            self.apply_torch_compile()

    @property
    def add_patch(self) -> bool:
        return self._add_patch

    def can_compile(self):
        if self.model.device.type != "cpu" or getattr(self.model.config, "quantization_config", None):
            return False
        return True

    def apply_torch_compile(self):
        from torch._inductor import config as inductor_config

        # System level optimization
        inductor_config.cpp_wrapper = True
        if self._add_patch and self.export_feature == "text-generation":
            # To avoid int value recompile.
            torch._dynamo.config.allow_unspec_int_on_nn_module = True
            # Patched model can disable cpp wrapper to get better performance.
            inductor_config.cpp_wrapper = False

        os.environ["TORCHINDUCTOR_FREEZING"] = "1"
        self.model.forward = torch.compile(self.model.forward, backend=counting_backend)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class IPEXModelForCausalLM(IPEXModel):
    export_feature = "text-generation"

    @torch.no_grad()
    def forward(
        self,
        input_ids: torch.LongTensor = None,
        attention_mask: Optional[torch.FloatTensor] = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        if self.add_patch:
            if input_ids is not None and attention_mask is None:
                attention_mask = torch.ones_like(input_ids)

            kwargs = self.prepare_page_attn_inputs(input_ids, attention_mask, **kwargs)

        results = self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

        if self.add_patch and self.use_cache and results.get("past_key_values", None) is not None:
            self.postprocess_ipex_paged_cache(results["past_key_values"], kwargs["input_lens"])

        return results

    def prepare_page_attn_inputs(self, input_ids, attention_mask, **kwargs):
        if not hasattr(self, "batch_size") or (input_ids.shape[0] != getattr(self, "batch_size", 0)):
            self.batch_size = input_ids.shape[0]
            self.decode_index = torch.arange(self.batch_size, dtype=torch.int).to(input_ids.device)
            self.decode_query_len_tensor = torch.arange(self.batch_size + 1, dtype=torch.int).to(input_ids.device)

        kwargs["input_lens"] = attention_mask.sum(-1).to(torch.int32)
        kwargs["seq_len_tensor"] = torch.cat(
            (kwargs["input_lens"].new_tensor([0]), kwargs["input_lens"].cumsum(-1).int())
        )
        kwargs["query_len_tensor"] = (
            kwargs["seq_len_tensor"].clone() if input_ids.shape[-1] != 1 else self.decode_query_len_tensor
        )
        if self.use_cache and kwargs.get("past_key_values", None) is not None:
            self.preprocess_ipex_paged_cache(kwargs["past_key_values"], kwargs["input_lens"])

        kwargs["index"] = (
            attention_mask.view(-1).nonzero().squeeze().int() if input_ids.shape[-1] != 1 else self.decode_index
        )
        # The int value will be recognized as constant if we pass it in the forward.
        # To avoid recompile, we pass the int value through config so the torch.compile will not recognize it as constant.
        self.model.config.max_input_lens = kwargs["input_lens"].max().item()

        return kwargs

    def preprocess_ipex_paged_cache(self, past_key_values, input_lens):
        batch_size = input_lens.shape[0]
        past_key_values_length = past_key_values.get_seq_length()
        if past_key_values_length == 0:
            past_key_values.alloc_slot_for_prefill(input_lens, batch_size)
        else:
            past_key_values.alloc_slot_for_decode(batch_size)

    def postprocess_ipex_paged_cache(self, past_key_values, input_lens):
        past_key_values_length = past_key_values.get_seq_length()
        # Use inplace op to keep the same memory address, avoid recompile
        if past_key_values_length == 0:
            past_key_values._seen_tokens = past_key_values._seen_tokens.add_(input_lens)
        else:
            past_key_values._seen_tokens = past_key_values._seen_tokens.add_(1)


# ---- driver: greedy `generate(max_new_tokens=12)` with the ipex_paged cache, as in tests/ipex/test_modeling.py ----
torch.manual_seed(0)
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2)
model = IPEXModelForCausalLM(LlamaForCausalLM(config).eval(), use_cache=True)

batch_size, prompt_len, max_new_tokens = 2, 6, 12
input_ids = torch.randint(0, config.vocab_size, (batch_size, prompt_len))
attention_mask = torch.ones_like(input_ids)
past_key_values = IPEXPagedCache(config, max_batch_size=batch_size, max_cache_len=prompt_len + max_new_tokens,
                                 dtype=torch.float32)
checksum = 0.0
for step in range(max_new_tokens):
    # GenerationMixin.prepare_inputs_for_generation: position_ids from the attention mask, only new tokens
    position_ids = attention_mask.long().cumsum(-1) - 1
    position_ids.masked_fill_(attention_mask == 0, 1)
    cur_ids = input_ids if step == 0 else input_ids[:, -1:]
    position_ids = position_ids[:, -cur_ids.shape[1] :]
    out = model(input_ids=cur_ids, attention_mask=attention_mask, position_ids=position_ids,
                past_key_values=past_key_values, use_cache=True, logits_to_keep=1)
    logits = out.logits[:, -1, :]
    checksum += logits.double().abs().sum().item()
    next_tokens = logits.argmax(-1)
    input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
    attention_mask = torch.cat([attention_mask, attention_mask.new_ones((batch_size, 1))], dim=-1)
checksum += input_ids.sum().item()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
