# Reproduction of RBLN-SW/vllm-rbln BEFORE PR #364 (7e0d70ff6cef, "fix: reshape logits to avoid
# stride-triggerd recompilation"): RBLNOptimumModelRunner compiles its sampler with
# torch.compile(self.sampler, dynamic=False, fullgraph=False) and, for a single request, hands it the
# model's logits as they are. optimum-rbln's Gemma3 prefill concatenates one (1, 1, V) logits row per
# prefill chunk and keeps the last one, so the (1, V) logits of a prompt prefilled in n chunks
# (text / image / text) have stride (n * V, 1): each new chunk count compiles the sampler again.
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.nn as nn

GRAPHS = 0


def counting_backend(gm, example_inputs):  # vllm-rbln: default "inductor" (sampler), "rbln" (top-k/top-p op)
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ----------------------------------------------------------------------------------------------------
# optimum-rbln (src/optimum/rbln/transformers/models/gemma3/gemma3_runtime_utils.py), trimmed.
# The compiled rebel.Runtime graphs are replaced by CPU stand-ins (embedding -> lm_head of the
# `query_position` token of the chunk), which return (1, 1, vocab) logits like the real runtime with
# logits_to_keep=1.
# ----------------------------------------------------------------------------------------------------
@dataclass
class RBLNGemma3ForCausalLMConfig:
    prefill_chunk_size: int = 8
    image_prefill_chunk_size: int = 8
    use_image_prefill: bool = True
    logits_to_keep: int = 1
    batch_size: int = 1


class RBLNPytorchRuntime:  # stand-in for the rebel.Runtime wrapper
    def __init__(self, lm_head: nn.Linear):
        self.lm_head = lm_head

    def __call__(self, input_chunk, cache_pos_chunk, block_tables, local_block_tables, query_position, *args):
        # logits of the token at `query_position` only (logits_to_keep=1): (1, 1, vocab)
        return self.lm_head(input_chunk[:, int(query_position) : int(query_position) + 1])


class RBLNGemma3RuntimeModel:
    def __init__(self, phase: str, rbln_config, embed_tokens: nn.Embedding, lm_head: nn.Linear):
        self.phase = phase
        self.rbln_config = rbln_config
        self.embed_tokens = embed_tokens
        self.lm_head = lm_head
        self.image_prefill = RBLNPytorchRuntime(lm_head)
        self.prefill = RBLNPytorchRuntime(lm_head) if self.phase == "prefill" else None

    def _prepare_prefill_inputs(self, inputs, cache_position, token_type_ids):
        query_length = inputs.shape[1]
        position_ids = cache_position.clone()
        # In case of Gemma3ForConditionalGeneration, the loop counter may not be a prefill_chunk_size,
        # so we cannot guarantee that the last chunk starts at a position that is a multiple of prefill_chunk_size.
        if self.rbln_config.use_image_prefill:
            padding_size = self.rbln_config.image_prefill_chunk_size
            inputs = torch.nn.functional.pad(inputs, (0, 0, 0, padding_size))
            cache_position = torch.nn.functional.pad(cache_position, (0, padding_size))
            position_ids = torch.nn.functional.pad(position_ids, (0, padding_size))
            token_type_ids = torch.nn.functional.pad(token_type_ids, (0, padding_size), value=-1)
        return inputs, cache_position, position_ids, query_length, token_type_ids

    def __call__(self, input_ids=None, inputs_embeds=None, cache_position=None, block_tables=None,
                 token_type_ids=None, local_block_tables=None, **kwargs):
        if self.phase == "decode":
            return self.decode_forward(self.embed_tokens(input_ids), cache_position, block_tables)
        return self.prefill_forward(inputs_embeds, cache_position, block_tables=block_tables,
                                    token_type_ids=token_type_ids, local_block_tables=local_block_tables)

    def decode_forward(self, inputs, cache_position=None, block_tables=None):
        return RBLNGemma3ForCausalLMOutput(logits=self.lm_head(inputs))  # (batch, 1, vocab)

    def prefill_forward(self, inputs, cache_position=None, block_tables=None, token_type_ids=None,
                        local_block_tables=None):
        """
        Performs chunked prefill for efficient KV-cache updates and memory optimization.
        """
        inputs, cache_position, position_ids, query_length, token_type_ids = self._prepare_prefill_inputs(
            inputs, cache_position, token_type_ids
        )
        padded_cache_lengths = 0

        step = 0
        output_logits = []
        while step < query_length:
            if self.rbln_config.use_image_prefill:
                # Check if the prefill chunk is an image prefill
                is_image_prefill = torch.all(
                    token_type_ids[:, step : step + self.rbln_config.image_prefill_chunk_size] == 1
                )
                # Check if the prefill chunk is a text prefill which have image_tokens in it.
                is_text_prefill_with_image_tokens = not is_image_prefill and torch.any(
                    token_type_ids[:, step : step + self.rbln_config.prefill_chunk_size] == 1
                )
            else:
                is_image_prefill, is_text_prefill_with_image_tokens = False, False

            # Check if the prefill chunk is the last chunk
            is_last_chunk = step + self.rbln_config.prefill_chunk_size >= query_length

            input_chunk = inputs[:, step : step + self.rbln_config.prefill_chunk_size]
            cache_pos_chunk = (
                cache_position[:, step : step + self.rbln_config.prefill_chunk_size] + padded_cache_lengths
            )

            # if text_prefill end with image_tokens, we only treat the text part.
            num_processed_tokens = self.rbln_config.prefill_chunk_size
            current_padded_cache_lengths = 0
            if is_text_prefill_with_image_tokens:
                first_image_token_idx = torch.where(
                    token_type_ids[:, step : step + self.rbln_config.prefill_chunk_size] == 1
                )[1][0]
                num_processed_tokens = first_image_token_idx.item()
                current_padded_cache_lengths = self.rbln_config.prefill_chunk_size - num_processed_tokens
            if is_last_chunk:
                num_processed_tokens = query_length - step

            query_position = torch.tensor(num_processed_tokens - 1, dtype=torch.int16)

            if is_image_prefill:
                outputs = self.image_prefill(input_chunk, cache_pos_chunk, block_tables, local_block_tables,
                                             query_position)
            else:
                outputs = self.prefill(input_chunk, cache_pos_chunk, block_tables, local_block_tables,
                                       query_position)
            output_logits.append(outputs)

            padded_cache_lengths += current_padded_cache_lengths
            step += num_processed_tokens

        # Aggregate output_logits
        output_logits = torch.concat(output_logits, dim=-2)
        if self.rbln_config.logits_to_keep > 0:
            output_logits = output_logits[:, -self.rbln_config.logits_to_keep :, :]

        return RBLNGemma3ForCausalLMOutput(logits=output_logits, padded_cache_lengths=padded_cache_lengths)


@dataclass
class RBLNGemma3ForCausalLMOutput:
    logits: torch.Tensor
    padded_cache_lengths: int = 0


class RBLNGemma3LanguageModel:  # optimum-rbln RBLNGemma3ForCausalLM: prefill_decoder / decoder runtimes
    def __init__(self, rbln_config, embed_tokens, lm_head):
        self.prefill_decoder = RBLNGemma3RuntimeModel("prefill", rbln_config, embed_tokens, lm_head)
        self.decoder = RBLNGemma3RuntimeModel("decode", rbln_config, embed_tokens, lm_head)


class RBLNGemma3ForConditionalGeneration:  # optimum-rbln, trimmed
    image_token_index = 7

    def __init__(self, vocab_size: int, hidden_size: int):
        rbln_config = RBLNGemma3ForCausalLMConfig()
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self.multi_modal_projector = nn.Linear(4, hidden_size)  # stand-in for the vision tower
        lm_head = nn.Linear(hidden_size, vocab_size, bias=False)
        self.language_model = RBLNGemma3LanguageModel(rbln_config, self.embed_tokens, lm_head)

    def _preprocess_prefill(self, input_ids, inputs_embeds, pixel_values):
        inputs_embeds = self.embed_tokens(input_ids)
        if pixel_values is not None:
            image_features = self.multi_modal_projector(pixel_values)  # (num_image_tokens, hidden)
            special_image_mask = (input_ids == self.image_token_index).unsqueeze(-1).expand_as(inputs_embeds)
            inputs_embeds = inputs_embeds.masked_scatter(special_image_mask, image_features)
        return inputs_embeds


# ----------------------------------------------------------------------------------------------------
# vllm-rbln (vllm_rbln/model_executor/models/optimum/{base,model_base,gemma3}.py), trimmed.
# ----------------------------------------------------------------------------------------------------
@dataclass
class ModelInputForRBLN:
    input_tokens: torch.Tensor
    input_positions: torch.Tensor
    block_tables: torch.Tensor
    running_requests_ids: list[str]
    finished_requests_ids: list[str]
    is_prompt: bool = False
    multi_modal_kwargs: dict | None = None


class LogitsProcessor(nn.Module):  # vllm.model_executor.layers.logits_processor, trimmed
    def __init__(self, vocab_size: int, scale: float = 1.0, logits_as_input: bool = False, soft_cap=None):
        super().__init__()
        self.scale = scale
        self.vocab_size = vocab_size
        self.logits_as_input = logits_as_input
        self.soft_cap = soft_cap

    def forward(self, lm_head, hidden_states, embedding_bias=None):
        if self.logits_as_input:
            logits = hidden_states
        else:
            raise NotImplementedError
        if logits is not None:
            if self.soft_cap is not None:
                logits = logits / self.soft_cap
                logits = torch.tanh(logits)
                logits = logits * self.soft_cap
            if self.scale != 1.0:
                logits *= self.scale
        return logits


class RBLNOptimumGemma3ForConditionalGeneration(nn.Module):
    def __init__(self, vocab_size: int, hidden_size: int):
        super().__init__()
        self.model = RBLNGemma3ForConditionalGeneration(vocab_size, hidden_size)
        self.dtype = torch.float32
        self.logits_processor = LogitsProcessor(vocab_size, logits_as_input=True)

    def forward(self, model_input: ModelInputForRBLN, **kwargs) -> torch.Tensor:
        input_ids = model_input.input_tokens
        position_ids = model_input.input_positions
        block_tables = model_input.block_tables
        is_prompt = model_input.is_prompt
        request_nums = input_ids.shape[0]
        cache_position = position_ids

        if is_prompt:
            inputs_embeds = None
            # token_type_ids model_input != token_type_ids of gemma3
            token_type_ids = torch.zeros_like(input_ids)
            token_type_ids[input_ids == self.model.image_token_index] = 1

            pixel_values = (model_input.multi_modal_kwargs or {}).get("pixel_values")
            inputs_embeds = self.model._preprocess_prefill(input_ids, inputs_embeds, pixel_values)
            output = self.model.language_model.prefill_decoder(
                inputs_embeds=inputs_embeds,
                cache_position=cache_position,
                block_tables=block_tables,
                token_type_ids=token_type_ids,
            )
            logits = output.logits
        else:
            logits = self.model.language_model.decoder(
                input_ids=input_ids,
                cache_position=cache_position,
                block_tables=block_tables,
            ).logits

        if not is_prompt:
            logits = logits[:request_nums]
        return logits

    def compute_logits(self, hidden_states: torch.Tensor, sampling_metadata) -> torch.Tensor:
        return self.logits_processor(None, hidden_states, sampling_metadata)


# ----------------------------------------------------------------------------------------------------
# vllm (vllm/v1/sample/{metadata,sampler}.py), trimmed to the paths taken here.
# ----------------------------------------------------------------------------------------------------
_SAMPLING_EPS = 1e-5


@dataclass
class LogitsProcessors:
    argmax_invariant: list = field(default_factory=list)
    non_argmax_invariant: list = field(default_factory=list)


@dataclass
class SamplingMetadata:
    temperature: torch.Tensor | None
    all_greedy: bool
    all_random: bool
    top_p: torch.Tensor | None
    top_k: torch.Tensor | None
    generators: dict
    max_num_logprobs: int | None
    no_penalties: bool
    prompt_token_ids: torch.Tensor | None
    frequency_penalties: torch.Tensor
    presence_penalties: torch.Tensor
    repetition_penalties: torch.Tensor
    output_token_ids: list[list[int]]
    allowed_token_ids_mask: torch.Tensor | None
    bad_words_token_ids: dict
    logitsprocs: LogitsProcessors
    logprobs_mode_override: str | None = None
    spec_token_ids: list[list[int]] | None = None


class SamplerOutput(NamedTuple):
    sampled_token_ids: torch.Tensor
    logprobs_tensors: object


class Sampler(nn.Module):
    def __init__(self, logprobs_mode="raw_logprobs"):
        super().__init__()
        self.logprobs_mode = logprobs_mode

    def forward(self, logits: torch.Tensor, sampling_metadata: SamplingMetadata,
                predict_bonus_token: bool = False) -> SamplerOutput:
        # Use float32 for the logits.
        logits = logits.to(torch.float32)
        num_logprobs = sampling_metadata.max_num_logprobs
        if num_logprobs is not None:
            raw_logprobs = self.compute_logprobs(logits)
        logits = self.apply_logits_processors(logits, sampling_metadata, predict_bonus_token)
        # Sample the next token.
        sampled, processed_logprobs = self.sample(logits, sampling_metadata)
        sampled = sampled.long()
        logprobs_tensors = None
        # Use int32 to reduce the tensor size.
        sampled = sampled.to(torch.int32)
        sampler_output = SamplerOutput(sampled_token_ids=sampled.unsqueeze(-1), logprobs_tensors=logprobs_tensors)
        return sampler_output

    @staticmethod
    def apply_temperature(logits, temp, all_random):
        if not all_random:
            temp = torch.where(temp < _SAMPLING_EPS, 1.0, temp)
        return logits.div_(temp.unsqueeze(dim=1))

    @staticmethod
    def greedy_sample(logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(dim=-1).view(-1)

    def sample(self, logits, sampling_metadata):
        logprobs_mode = self.logprobs_mode
        assert not (sampling_metadata.all_greedy and sampling_metadata.all_random)
        if sampling_metadata.all_random:
            greedy_sampled = None
        else:
            greedy_sampled = self.greedy_sample(logits)
            if sampling_metadata.all_greedy:
                processed_logprobs = None
                if sampling_metadata.max_num_logprobs is not None:
                    if logprobs_mode == "processed_logprobs":
                        processed_logprobs = self.compute_logprobs(logits)
                return greedy_sampled, processed_logprobs
        assert sampling_metadata.temperature is not None
        logits = self.apply_temperature(logits, sampling_metadata.temperature, sampling_metadata.all_random)
        for processor in sampling_metadata.logitsprocs.argmax_invariant:
            logits = processor.apply(logits)
        random_sampled, processed_logprobs = self.topk_topp_sampler(
            logits, sampling_metadata.generators, sampling_metadata.top_k, sampling_metadata.top_p
        )
        if greedy_sampled is None:
            return random_sampled, processed_logprobs
        sampled = torch.where(sampling_metadata.temperature < _SAMPLING_EPS, greedy_sampled, random_sampled,
                              out=greedy_sampled)
        return sampled, processed_logprobs

    @staticmethod
    def compute_logprobs(logits: torch.Tensor) -> torch.Tensor:
        return logits.log_softmax(dim=-1, dtype=torch.float32)

    def apply_logits_processors(self, logits, sampling_metadata, predict_bonus_token):
        bad_words_token_ids = sampling_metadata.bad_words_token_ids
        output_token_ids = sampling_metadata.output_token_ids
        # Apply allowed token ids.
        if sampling_metadata.allowed_token_ids_mask is not None:
            logits.masked_fill_(sampling_metadata.allowed_token_ids_mask, float("-inf"))
        # Apply bad words exclusion.
        if bad_words_token_ids:
            raise NotImplementedError
        # Apply logits processors which can impact greedy sampling.
        for processor in sampling_metadata.logitsprocs.non_argmax_invariant:
            logits = processor.apply(logits)
        # Apply penalties (e.g., freq_penalties).
        logits = self.apply_penalties(logits, sampling_metadata, output_token_ids)
        return logits

    @staticmethod
    def apply_penalties(logits, sampling_metadata, output_token_ids):
        if sampling_metadata.no_penalties:
            return logits
        raise NotImplementedError


# ----------------------------------------------------------------------------------------------------
# vllm-rbln (vllm_rbln/v1/sample/rbln_sampler.py), trimmed.
# ----------------------------------------------------------------------------------------------------
def random_sample(probs: torch.Tensor, generators: dict[int, torch.Generator]) -> torch.Tensor:
    q = torch.empty_like(probs)
    if len(generators) != probs.shape[0]:
        q.exponential_()
    if generators:
        for i, generator in generators.items():
            q[i].exponential_(generator=generator)
    return probs.div_(q).argmax(dim=-1).view(-1)


def apply_top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
    """Mock implementation of `top_k_top_p` used for torch ops registration."""
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False, stable=True)
    if k is not None:
        top_k_mask = logits_sort.size(1) - k.to(torch.long)  # shape: B
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        top_k_mask = logits_sort < top_k_mask
        logits_sort.masked_fill_(top_k_mask, -float("inf"))
    if p is not None:
        probs_sort = logits_sort.softmax(dim=-1)
        probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        top_p_mask[:, -1] = False
        logits_sort.masked_fill_(top_p_mask, -float("inf"))
    # Re-sort the probabilities.
    logits = logits_sort.scatter(dim=-1, index=logits_idx, src=logits_sort)
    # Select the sampled token.
    return random_sample(logits, {})


@torch.library.custom_op("rbln::top_k_top_p", mutates_args=())
def top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
    return apply_top_k_top_p(logits, k, p)


@top_k_top_p.register_fake
def top_k_top_p_fake(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
    return apply_top_k_top_p(logits, k, p)


def rbln_top_k_top_p_sample(logits: torch.Tensor, k: torch.Tensor | None, p: torch.Tensor | None) -> torch.Tensor:
    # Apply top-k top-p sampling using RBLN custom op.
    # It requires softmax prior to calling the op.
    probs = torch.nn.functional.softmax(logits, dim=-1)
    sampled = torch.ops.rbln.top_k_top_p(probs, k, p)
    return sampled


class RBLNTopKTopPSampler(nn.Module):
    def __init__(self, logprobs_mode="raw_logprobs", seed: int = 42):
        super().__init__()
        self.logprobs_mode = logprobs_mode
        self._compiled_rbln_topk_topp_sampler = torch.compile(
            rbln_top_k_top_p_sample,
            dynamic=False,
            fullgraph=True,
            backend=counting_backend,  # vllm-rbln: backend="rbln", options={"compile_context": ...}
        )
        self.forward = self.forward_rbln

    @torch.compiler.disable
    def top_k_top_p_sample(self, logits, k, p):
        return self._compiled_rbln_topk_topp_sampler(logits, k, p)

    def forward_rbln(self, logits, generators, k, p):
        """More optimized implementation for top-k and top-p sampling."""
        return self.top_k_top_p_sample(logits, k, p), None


class RBLNSampler(Sampler):
    def __init__(self, logprobs_mode="raw_logprobs", seed: int = 42):
        super().__init__()
        self.topk_topp_sampler = RBLNTopKTopPSampler(logprobs_mode=logprobs_mode, seed=seed)

    def greedy_sample(self, logits: torch.Tensor) -> torch.Tensor:
        # NOTE:
        # If there are any parameters for top-k or top-p,
        # this function works as a greedy sampler.
        sampled, _ = self.topk_topp_sampler(logits, dict(), None, None)
        return sampled

    def apply_temperature(self, logits, temp, all_random):
        # NOTE: in-place division triggers buffer key error in torchinductor
        if not all_random:
            temp = torch.where(temp < _SAMPLING_EPS, 1.0, temp)
        return logits.div(temp.unsqueeze(dim=1))


# ----------------------------------------------------------------------------------------------------
# vllm-rbln (vllm_rbln/v1/worker/optimum_model_runner.py), trimmed: RBLNOptimumModelRunner.
# ----------------------------------------------------------------------------------------------------
class ExecuteModelState(NamedTuple):
    scheduler_output: object
    logits: torch.Tensor
    hidden_states: torch.Tensor
    sample_hidden_states: torch.Tensor
    is_prompt: bool


class InputBatch:  # stand-in for vllm's (RBLN)InputBatch: one running request
    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size
        self.num_reqs = 1
        self.sampling_metadata = SamplingMetadata(
            temperature=torch.zeros(1), all_greedy=True, all_random=False, top_p=None, top_k=None,
            generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
            frequency_penalties=torch.zeros(1), presence_penalties=torch.zeros(1),
            repetition_penalties=torch.ones(1), output_token_ids=[[]], allowed_token_ids_mask=None,
            bad_words_token_ids={}, logitsprocs=LogitsProcessors(),
        )

    def update_async_output_token_ids(self):
        pass


class RBLNOptimumModelRunner:
    def __init__(self, vocab_size: int, hidden_size: int, max_num_seqs: int = 1):
        self.max_num_seqs = max_num_seqs
        self.model = RBLNOptimumGemma3ForConditionalGeneration(vocab_size, hidden_size)
        self.input_batch = InputBatch(vocab_size)
        self.execute_model_state = None
        # Sampler
        self.use_rbln_sampler = True  # envs.VLLM_RBLN_SAMPLER
        if self.use_rbln_sampler:
            self.pooled_tensors: dict[int, torch.Tensor] = {}
            sampler = RBLNSampler(logprobs_mode="raw_logprobs", seed=42)
        else:
            sampler = Sampler(logprobs_mode="raw_logprobs")
        self.sampler = sampler
        if self.use_rbln_sampler:
            self.prepare_rbln_sampler()

    @staticmethod
    def get_bucket_sizes(max_num_seqs: int) -> list[int]:
        bucket_sizes = [i for i in [1, 2, 4] if i <= max_num_seqs]
        if max_num_seqs >= 8:
            bucket_sizes += list(range(8, min(max_num_seqs + 1, 256), 8))
        if max_num_seqs >= 256:
            bucket_sizes += list(range(256, max_num_seqs + 1, 16))
        if max_num_seqs not in bucket_sizes:
            bucket_sizes.append(max_num_seqs)
        return bucket_sizes

    def prepare_rbln_sampler(self):
        self.bucket_sizes = tuple(self.get_bucket_sizes(self.max_num_seqs))
        with torch.inference_mode():
            for bucket_size in self.bucket_sizes:
                self.pooled_tensors[bucket_size] = torch.empty(
                    (bucket_size, self.input_batch.vocab_size), dtype=self.model.dtype
                )
        torch._dynamo.config.recompile_limit = len(self.bucket_sizes) * 8  # * len(WARM_UP_CONFIGS)
        self.sampler = torch.compile(self.sampler, dynamic=False, fullgraph=False, backend=counting_backend)

    @torch.inference_mode()
    def execute_model(self, model_input: ModelInputForRBLN) -> None:
        hidden_states = self.model(model_input)
        sample_hidden_states = hidden_states.clone()
        # [batch_size, 1, vocab_size] -> [batch_size, vocab_size]
        hidden_states = hidden_states.squeeze(1)
        logits = self.model.compute_logits(hidden_states, None)
        self.execute_model_state = ExecuteModelState(
            scheduler_output=None,
            logits=logits,
            hidden_states=hidden_states,
            sample_hidden_states=sample_hidden_states,
            is_prompt=model_input.is_prompt,
        )
        return None

    @torch.inference_mode
    def sample_tokens(self, grammar_output=None) -> list[list[int]]:
        (scheduler_output, logits, hidden_states, sample_hidden_states, is_prompt) = self.execute_model_state
        use_padding = self.use_rbln_sampler and self.input_batch.num_reqs > 1
        self.execute_model_state = None

        if use_padding:
            num_reqs = self.input_batch.num_reqs
            padded_logits = self.pooled_tensors[self.bucket_size]
            padded_logits[:num_reqs].copy_(logits)
        else:
            padded_logits = logits
        sampler_output = self._sample(padded_logits, spec_decode_metadata=None)
        return sampler_output.sampled_token_ids.tolist()

    def _sample(self, logits, spec_decode_metadata) -> SamplerOutput:
        sampling_metadata = self.input_batch.sampling_metadata
        self.input_batch.update_async_output_token_ids()
        return self.sampler(logits=logits, sampling_metadata=sampling_metadata)


# ----------------------------------------------------------------------------------------------------
# Driver: four Gemma3 requests served one at a time (prefill, then 3 decode steps each).
# Prompt chunking with prefill_chunk_size = image_prefill_chunk_size = 8 and 8 image tokens:
#   text 5             -> 1 chunk     logits stride (V, 1)
#   text 3 + img + 4   -> 3 chunks    logits stride (3V, 1)
#   text 12            -> 2 chunks    logits stride (2V, 1)
#   text 2 + img + 2   -> 3 chunks    logits stride (3V, 1)
# ----------------------------------------------------------------------------------------------------
torch.manual_seed(0)
VOCAB, HIDDEN, IMG = 32, 16, RBLNGemma3ForConditionalGeneration.image_token_index
runner = RBLNOptimumModelRunner(VOCAB, HIDDEN, max_num_seqs=1)
prompts = [
    ([11, 12, 13, 14, 15], False),
    ([2, 3, 4] + [IMG] * 8 + [5, 6, 8, 9], True),
    ([20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31], False),
    ([1, 2] + [IMG] * 8 + [3, 4], True),
]
checksum = 0
for i, (tokens, has_image) in enumerate(prompts):
    input_ids = torch.tensor([tokens])
    positions = torch.arange(len(tokens)).unsqueeze(0)
    mm = {"pixel_values": torch.randn(8, 4)} if has_image else None
    runner.execute_model(ModelInputForRBLN(input_ids, positions, torch.zeros(1, 1, dtype=torch.int16),
                                           [f"req_{i}"], [], is_prompt=True, multi_modal_kwargs=mm))
    generated = runner.sample_tokens()[0]
    for step in range(3):
        pos = torch.tensor([[len(tokens) + step]])
        runner.execute_model(ModelInputForRBLN(torch.tensor([generated[-1:]]), pos,
                                               torch.zeros(1, 1, dtype=torch.int16), [f"req_{i}"], []))
        generated += runner.sample_tokens()[0]
    checksum += sum((j + 1) * t for j, t in enumerate(generated)) * (i + 1)
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum}")
