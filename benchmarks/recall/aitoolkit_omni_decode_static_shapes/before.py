# ostris/ai-toolkit before ca42a72f: Qwen3-Omni captioner, compiled static-cache decode.
# extensions_built_in/captioner/Qwen3OmniCaptioner.py (OstrisQwen3OmniThinker, _caption_batch,
# run_caption_loop/flush, maybe_compile_models) kept; transformers' generate / static cache /
# Qwen3-Omni thinker are small CPU stand-ins (marked STAND-IN).
import math
import traceback
from dataclasses import dataclass
from types import SimpleNamespace

import torch
from torch import nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


D, V = 16, 50

# ---------------------------------------------------------------- STAND-INs: transformers


@dataclass
class Qwen3OmniMoeThinkerCausalLMOutputWithPast:  # STAND-IN for the ModelOutput dataclass
    logits: torch.Tensor = None


class StaticCache:  # STAND-IN for transformers.StaticCache: fixed [B, max_cache_len, D] buffers
    def __init__(self, batch_size, max_cache_len):
        self.max_cache_len = max_cache_len
        self.key_cache = torch.zeros(batch_size, max_cache_len, D)
        self.value_cache = torch.zeros(batch_size, max_cache_len, D)

    def update(self, k, v, cache_position):
        self.key_cache.index_copy_(1, cache_position, k)
        self.value_cache.index_copy_(1, cache_position, v)
        return self.key_cache, self.value_cache


class MaxLengthCriteria:  # STAND-IN for transformers.generation.MaxLengthCriteria
    def __init__(self, max_length):
        self.max_length = max_length

    def __call__(self, input_ids):
        return input_ids.shape[1] >= self.max_length


class StoppingCriteriaList(list):  # STAND-IN
    def __call__(self, input_ids):
        return any(c(input_ids) for c in self)


class Qwen3OmniMoeThinkerForConditionalGeneration(nn.Module):
    """STAND-IN for the transformers thinker + GenerationMixin. The lines marked
    (upstream) are copied from transformers' Qwen3OmniMoeThinkerForConditionalGeneration.forward."""

    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, D)
        self.audio_proj = nn.Linear(4, D)
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.lm_head = nn.Linear(D, V)
        self.rope_deltas = None
        self.generation_config = SimpleNamespace(cache_implementation=None)
        self._compiled_call = None

    def get_input_embeddings(self):
        return self.embed_tokens

    def get_rope_index(self, input_ids, image_grid_thw, video_grid_thw, attention_mask,
                       use_audio_in_video, audio_seqlens, second_per_grids):
        pos = (attention_mask.cumsum(-1) - 1).clamp(min=0)  # stand-in for the 3D MRoPE index
        return pos.unsqueeze(0).expand(3, -1, -1), pos.max(-1, keepdim=True).values + 1 - attention_mask.shape[1]

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                cache_position=None, inputs_embeds=None, input_features=None, pixel_values=None,
                pixel_values_videos=None, image_grid_thw=None, video_grid_thw=None,
                feature_attention_mask=None, audio_feature_lengths=None, use_audio_in_video=None,
                video_second_per_grid=None, **kwargs):
        if inputs_embeds is None:  # (upstream)
            inputs_embeds = self.get_input_embeddings()(input_ids)
        if input_features is not None:  # (upstream branch; audio tower is a stand-in)
            inputs_embeds = inputs_embeds + self.audio_proj(input_features.mean(-1))[:, None, :]
        if feature_attention_mask is not None:  # (upstream)
            audio_feature_lengths = torch.sum(feature_attention_mask, dim=1)
        else:
            audio_feature_lengths = None
        # text model: one attention layer over the static cache (stand-in)
        h = inputs_embeds + torch.sin(position_ids[0].float())[..., None]
        q = self.q_proj(h)
        k, v = past_key_values.update(self.k_proj(h), self.v_proj(h), cache_position)
        scores = q @ k.transpose(1, 2) / math.sqrt(D)
        scores = scores.masked_fill(~attention_mask[:, 0], float("-inf"))
        h = h + torch.softmax(scores, -1) @ v
        return Qwen3OmniMoeThinkerCausalLMOutputWithPast(logits=self.lm_head(h))

    def prepare_inputs_for_generation(self, input_ids, past_key_values=None, attention_mask=None,
                                      cache_position=None, **kwargs):
        # STAND-IN for GenerationMixin + the Omni thinker override: slice by cache_position,
        # build the static-size 4D mask, drop pixel_values*/input_features after prefill
        input_ids = input_ids[:, cache_position]
        L = past_key_values.max_cache_len
        mask2d = torch.nn.functional.pad(attention_mask, (0, L - attention_mask.shape[1])).bool()
        causal = torch.arange(L)[None, :] <= cache_position[:, None]
        mask4d = (mask2d[:, None, None, :] & causal[None, None]).contiguous()
        model_inputs = dict(input_ids=input_ids, attention_mask=mask4d, past_key_values=past_key_values,
                            cache_position=cache_position, **kwargs)
        if cache_position[0] != 0:
            model_inputs["pixel_values"] = None
            model_inputs["pixel_values_videos"] = None
            model_inputs["input_features"] = None
        return model_inputs

    def get_compiled_call(self):
        # STAND-IN for PreTrainedModel.get_compiled_call(CompileConfig()): transformers'
        # defaults fullgraph=False, dynamic=False (mode="reduce-overhead" dropped: custom backend)
        if self._compiled_call is None:
            self._compiled_call = torch.compile(self.__call__, fullgraph=False, dynamic=False,
                                                backend=counting_backend)
        return self._compiled_call

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, max_new_tokens=None, max_length=None,
                 stopping_criteria=None, **model_kwargs):
        # STAND-IN for GenerationMixin.generate (greedy, static cache: prefill eager, decode compiled)
        batch_size, input_len = input_ids.shape
        if max_length is None:
            max_length = input_len + max_new_tokens
        past_key_values = StaticCache(batch_size, max_length)
        criteria = StoppingCriteriaList([MaxLengthCriteria(max_length)] + list(stopping_criteria or []))
        cache_position = torch.arange(input_len)
        while True:
            model_inputs = self.prepare_inputs_for_generation(
                input_ids, past_key_values=past_key_values, attention_mask=attention_mask,
                cache_position=cache_position, **model_kwargs)
            is_prefill = cache_position[0] == 0
            model_forward = self.__call__ if is_prefill else self.get_compiled_call()
            outputs = model_forward(**model_inputs)
            next_tokens = outputs.logits[:, -1].argmax(-1)
            input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones(batch_size, 1)], dim=-1)
            cache_position = cache_position[-1:] + 1
            if criteria(input_ids):
                return input_ids


# ---------------------------------------------------------------- ai-toolkit (verbatim)


class OstrisQwen3OmniThinker(Qwen3OmniMoeThinkerForConditionalGeneration):
    _pad_mask_2d = None

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        cache_position=None,
        **kwargs,
    ):
        if position_ids is None and input_ids is not None:
            if input_ids.shape[1] > 1 or self.rope_deltas is None:
                # prefill: replicate the upstream math with a valid 2D mask
                mask2d = (
                    attention_mask
                    if attention_mask is not None and attention_mask.dim() == 2
                    else self._pad_mask_2d
                )
                if mask2d is None:
                    mask2d = torch.ones_like(input_ids)
                mask2d = mask2d.long()
                if mask2d.shape[1] != input_ids.shape[1]:
                    # static cache pads the mask out to max_cache_len
                    mask2d = mask2d[:, : input_ids.shape[1]]
                feature_attention_mask = kwargs.get("feature_attention_mask", None)
                if feature_attention_mask is not None:
                    audio_feature_lengths = torch.sum(feature_attention_mask, dim=1)
                else:
                    audio_feature_lengths = kwargs.get("audio_feature_lengths", None)
                delta0 = (1 - mask2d).sum(dim=-1).unsqueeze(1)
                position_ids, rope_deltas = self.get_rope_index(
                    input_ids,
                    kwargs.get("image_grid_thw", None),
                    kwargs.get("video_grid_thw", None),
                    mask2d,
                    kwargs.get("use_audio_in_video", None) or False,
                    audio_feature_lengths,
                    kwargs.get("video_second_per_grid", None),
                )
                self.rope_deltas = rope_deltas - delta0
            else:
                # decode: continue from the cache position; sync-free
                batch_size, seq_length = input_ids.shape
                deltas = self.rope_deltas.to(input_ids.device)
                if cache_position is not None:
                    pos = cache_position.view(1, -1) + deltas
                else:
                    past_len = (
                        past_key_values.get_seq_length()
                        if past_key_values is not None
                        else 0
                    )
                    pos = (
                        torch.arange(seq_length, device=input_ids.device).view(1, -1)
                        + past_len
                        + deltas
                    )
                position_ids = pos.unsqueeze(0).expand(3, batch_size, seq_length)
        return super().forward(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            cache_position=cache_position,
            **kwargs,
        )


class Qwen3OmniCaptioner:  # BaseCaptioner plumbing (job, UI, threads, tqdm, saving) stubbed
    def __init__(self, videos, batch_size, max_new_tokens):
        torch.manual_seed(0)
        self.model = OstrisQwen3OmniThinker()
        self.model.eval()
        self.file_paths = list(videos)
        self.caption_config = SimpleNamespace(batch_size=batch_size, max_new_tokens=max_new_tokens, compile=True)
        self.captions = {}

    def _prep_media(self, file_path):  # STAND-IN for video/audio decode: per-video sizes
        n_tok, n_frames = file_path
        g = torch.Generator().manual_seed(n_tok * 100 + n_frames)
        return {"file": file_path, "audio": True, "n_tok": n_tok,
                "ids": torch.randint(0, V, (n_tok,), generator=g),
                "feats": torch.randn(4, n_frames, generator=g)}

    def _process_items(self, items):  # STAND-IN for the processor: left-pad text, pad audio frames
        L = max(it["n_tok"] for it in items)
        F = max(it["feats"].shape[1] for it in items)
        B = len(items)
        input_ids = torch.zeros(B, L, dtype=torch.long)
        attention_mask = torch.zeros(B, L, dtype=torch.long)
        input_features = torch.zeros(B, 4, F)
        feature_attention_mask = torch.zeros(B, F, dtype=torch.long)
        for i, it in enumerate(items):
            input_ids[i, L - it["n_tok"]:] = it["ids"]
            attention_mask[i, L - it["n_tok"]:] = 1
            input_features[i, :, : it["feats"].shape[1]] = it["feats"]
            feature_attention_mask[i, : it["feats"].shape[1]] = 1
        return dict(input_ids=input_ids, attention_mask=attention_mask, input_features=input_features,
                    feature_attention_mask=feature_attention_mask,
                    video_grid_thw=torch.tensor([[2, 2, 2]] * B))

    def _caption_batch(self, items):
        use_audio = items[0]["audio"] is not None
        inputs = self._process_items(items)
        # under static cache, generate hands the forward a prepared 4D mask;
        # the true 2D padding mask is needed for the prefill rope index
        self.model._pad_mask_2d = inputs.get("attention_mask", None)
        generated_ids = self.model.generate(
            **inputs,
            use_audio_in_video=use_audio,
            max_new_tokens=self.caption_config.max_new_tokens,
        )
        trimmed = generated_ids[:, inputs["input_ids"].shape[1] :]
        return [t for t in trimmed]  # processor.batch_decode stubbed: keep token ids

    def run_caption_loop(self):
        batch_size = max(1, int(self.caption_config.batch_size))

        def finish(file_path, caption):
            if caption is not None:
                self.captions[file_path] = caption

        def flush(bucket):
            if len(bucket) == 0:
                return
            items = list(bucket)
            bucket.clear()
            try:
                captions = self._caption_batch(items)
                for it, cap in zip(items, captions):
                    finish(it["file"], cap)
            except Exception as e:
                print(f"Batch failed ({e}); retrying files individually")
                traceback.print_exc()
                raise

        with_audio, silent = [], []
        for path in self.file_paths:  # thread-pool prefetch stubbed: sequential
            item = self._prep_media(path)
            bucket = with_audio if item["audio"] is not None else silent
            bucket.append(item)
            if len(bucket) >= batch_size:
                flush(bucket)
        flush(with_audio)
        flush(silent)

    def maybe_compile_models(self):
        if not self.caption_config.compile:
            return
        # a static (compileable) cache makes generate auto-compile its decode
        # loop (get_compiled_call); prefill stays eager
        self.model.generation_config.cache_implementation = "static"


# 8 videos of different lengths (text tokens, audio frames), batch_size 3 -> buckets 3, 3, 2
videos = [(6, 10), (9, 12), (7, 8), (12, 15), (8, 9), (10, 14), (5, 7), (11, 11)]
captioner = Qwen3OmniCaptioner(videos, batch_size=3, max_new_tokens=4)
captioner.maybe_compile_models()
captioner.run_caption_loop()

checksum = 0.0
for i, path in enumerate(videos):
    checksum += float((captioner.captions[path].float() * (i + 1)).sum())
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
