# huggingface/transformers, src/transformers/generation/utils.py before PR #37629 (2025-04-19):
# GenerationMixin.prepare_inputs_for_generation looks for the 4D-mask function only on
# `getattr(self, self.base_model_prefix, None)`. Gemma3ForCausalLM has base_model_prefix
# "language_model" but keeps its decoder in `self.model`, so the function is not found and the
# growing 2D attention mask reaches the compiled (dynamic=False) forward: one graph per step.
# Trimmed: a one-layer Gemma3-like text model, StaticCache, greedy _sample; only torch.
import torch
from torch import nn

torch.manual_seed(0)

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class Gemma3TextConfig:
    vocab_size = 64
    hidden_size = 32
    num_attention_heads = 2
    head_dim = 16
    _attn_implementation = "sdpa"


class StaticCache:
    is_compileable = True

    def __init__(self, config, max_batch_size, max_cache_len, dtype=torch.float32):
        self.max_cache_len = max_cache_len
        shape = (max_batch_size, config.num_attention_heads, max_cache_len, config.head_dim)
        self.key_cache = [torch.zeros(shape, dtype=dtype)]
        self.value_cache = [torch.zeros(shape, dtype=dtype)]

    def get_max_cache_shape(self):
        return self.max_cache_len

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        cache_position = cache_kwargs.get("cache_position")
        k_out = self.key_cache[layer_idx]
        v_out = self.value_cache[layer_idx]
        k_out.index_copy_(2, cache_position, key_states)
        v_out.index_copy_(2, cache_position, value_states)
        return k_out, v_out


class Gemma3Attention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask, past_key_value, cache_position):
        bsz, q_len, _ = hidden_states.shape
        hidden_shape = (bsz, q_len, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states, value_states = past_key_value.update(
            key_states, value_states, self.layer_idx, {"cache_position": cache_position}
        )
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_output = torch.nn.functional.scaled_dot_product_attention(
            query_states, key_states, value_states, attn_mask=causal_mask
        )
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


class Gemma3PreTrainedModel(nn.Module):
    base_model_prefix = "language_model"

    @property
    def dtype(self):
        return next(self.parameters()).dtype


class Gemma3TextModel(Gemma3PreTrainedModel):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([Gemma3Attention(config, 0)])

    def forward(self, input_ids, attention_mask, position_ids, past_key_values, cache_position):
        inputs_embeds = self.embed_tokens(input_ids)
        causal_mask = self._update_causal_mask(attention_mask, inputs_embeds, cache_position, past_key_values)
        hidden_states = inputs_embeds
        for decoder_layer in self.layers:
            hidden_states = hidden_states + decoder_layer(hidden_states, causal_mask, past_key_values, cache_position)
        return hidden_states

    def _update_causal_mask(self, attention_mask, input_tensor, cache_position, past_key_values):
        dtype, device = input_tensor.dtype, input_tensor.device
        sequence_length = input_tensor.shape[1]
        if isinstance(past_key_values, StaticCache):
            target_length = past_key_values.get_max_cache_shape()
        else:
            target_length = attention_mask.shape[-1] if attention_mask is not None else input_tensor.shape[1]
        causal_mask = self._prepare_4d_causal_attention_mask_with_cache_position(
            attention_mask,
            sequence_length=sequence_length,
            target_length=target_length,
            dtype=dtype,
            device=device,
            cache_position=cache_position,
            batch_size=input_tensor.shape[0],
        )
        return causal_mask

    @staticmethod
    def _prepare_4d_causal_attention_mask_with_cache_position(
        attention_mask, sequence_length, target_length, dtype, device, cache_position, batch_size, **kwargs
    ):
        if attention_mask is not None and attention_mask.dim() == 4:
            # In this case we assume that the mask comes already in inverted form and requires no inversion or slicing.
            causal_mask = attention_mask
        else:
            min_dtype = torch.finfo(dtype).min
            causal_mask = torch.full(
                (sequence_length, target_length), fill_value=min_dtype, dtype=dtype, device=device
            )
            if sequence_length != 1:
                causal_mask = torch.triu(causal_mask, diagonal=1)
            causal_mask *= torch.arange(target_length, device=device) > cache_position.reshape(-1, 1)
            causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1)
            if attention_mask is not None:
                causal_mask = causal_mask.clone()  # copy to contiguous memory for in-place edit
                mask_length = attention_mask.shape[-1]
                padding_mask = causal_mask[:, :, :, :mask_length] + attention_mask[:, None, None, :].to(
                    causal_mask.device
                )
                padding_mask = padding_mask == 0
                causal_mask[:, :, :, :mask_length] = causal_mask[:, :, :, :mask_length].masked_fill(
                    padding_mask, min_dtype
                )
        return causal_mask


class GenerationMixin:
    def get_compiled_call(self):
        # transformers: torch.compile(self.__call__, **compile_config.to_dict()); CompileConfig defaults
        # fullgraph=True, dynamic=False, backend="inductor", mode="reduce-overhead" (CUDA graphs; dropped here)
        if not hasattr(self, "_compiled_call"):
            self._compiled_call = torch.compile(
                self.__call__, fullgraph=True, dynamic=False, backend=counting_backend
            )
        return self._compiled_call

    def prepare_inputs_for_generation(
        self, input_ids, past_key_values=None, attention_mask=None, cache_position=None, **kwargs
    ):
        model_inputs = {"cache_position": cache_position}
        if past_key_values is not None:
            model_inputs["past_key_values"] = past_key_values
            if input_ids.shape[1] != cache_position.shape[0]:
                input_ids = input_ids[:, cache_position]
        input_ids_key = "input_ids"
        model_inputs[input_ids_key] = input_ids.clone(memory_format=torch.contiguous_format)

        position_ids = attention_mask.long().cumsum(-1) - 1
        position_ids.masked_fill_(attention_mask == 0, 1)
        position_ids = position_ids[:, -input_ids.shape[1] :]
        model_inputs["position_ids"] = position_ids.clone(memory_format=torch.contiguous_format)

        # 6. Create 4D attention mask is we are using a compilable cache (important for performant compiled forward
        # pass)
        if (
            isinstance(past_key_values, StaticCache)
            and past_key_values.is_compileable
            and attention_mask is not None
            and attention_mask.ndim == 2
        ):
            batch_size, sequence_length = model_inputs[input_ids_key].shape[:2]
            device = model_inputs[input_ids_key].device

            # Create the causal mask with fixed shape in advance, to reduce recompilations. If the function to create
            # the 4D causal mask exists, it should be present in the base model (XXXModel class).
            base_model = getattr(self, self.base_model_prefix, None)
            if base_model is None:
                causal_mask_creation_function = getattr(
                    self, "_prepare_4d_causal_attention_mask_with_cache_position", None
                )
            else:
                causal_mask_creation_function = getattr(
                    base_model, "_prepare_4d_causal_attention_mask_with_cache_position", None
                )
            if causal_mask_creation_function is None:
                pass  # logger.warning_once("... Compiled forward passes will be sub-optimal ...")
            else:
                attention_mask = causal_mask_creation_function(
                    attention_mask,
                    sequence_length=sequence_length,
                    target_length=past_key_values.get_max_cache_shape(),
                    dtype=self.dtype,
                    device=device,
                    cache_position=cache_position,
                    batch_size=batch_size,
                    config=self.config,
                    past_key_values=past_key_values,
                )
        if attention_mask is not None:
            model_inputs["attention_mask"] = attention_mask
        return model_inputs

    def _update_model_kwargs_for_generation(self, model_kwargs, num_new_tokens=1):
        attention_mask = model_kwargs["attention_mask"]
        model_kwargs["attention_mask"] = torch.cat(
            [attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=-1
        )
        model_kwargs["cache_position"] = model_kwargs["cache_position"][-1:] + num_new_tokens
        return model_kwargs

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, max_new_tokens):
        past_key_values = StaticCache(self.config, input_ids.shape[0], max_cache_len=16, dtype=self.dtype)
        model_kwargs = {
            "attention_mask": attention_mask,
            "past_key_values": past_key_values,
            "cache_position": torch.arange(input_ids.shape[1]),
        }
        model_forward = self.__call__
        if past_key_values.is_compileable:
            model_forward = self.get_compiled_call()
        scores = []
        is_prefill = True
        for _ in range(max_new_tokens):
            model_inputs = self.prepare_inputs_for_generation(input_ids, **model_kwargs)
            if is_prefill:
                logits = self(**model_inputs)
                is_prefill = False
            else:
                logits = model_forward(**model_inputs)
            next_token_logits = logits[:, -1, :].float()
            scores.append(next_token_logits)
            next_tokens = torch.argmax(next_token_logits, dim=-1)
            input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
            model_kwargs = self._update_model_kwargs_for_generation(model_kwargs)
        return input_ids, scores


class Gemma3ForCausalLM(Gemma3PreTrainedModel, GenerationMixin):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = Gemma3TextModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def get_decoder(self):
        return self.model

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, cache_position=None):
        hidden_states = self.model(input_ids, attention_mask, position_ids, past_key_values, cache_position)
        return self.lm_head(hidden_states)


model = Gemma3ForCausalLM(Gemma3TextConfig()).eval()
input_ids = torch.randint(1, 64, (2, 4))
attention_mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])  # left padding
out_ids, scores = model.generate(input_ids, attention_mask, max_new_tokens=6)
print("GRAPHS", GRAPHS)
print("OUT", round(float(torch.stack(scores).sum()) + float(out_ids.sum()), 4))
