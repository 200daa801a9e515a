# Reproduction of hao-ai-lab/FastVideo BEFORE 2c137931f ("[bugfix] Fix Dreamverse Modal compile warmup
# latency", #1394, 2026-05-26): the LTX-2 text encoder (LTX2GemmaTextEncoderModel) is compiled whole by
# ComposedPipelineBase._maybe_compile_pipeline_module (fullgraph=True, dynamic=False). Its forward calls the
# HF Gemma model with output_hidden_states=True, and transformers' @check_model_inputs (4.57) records the
# hidden states by monkey-patching every decoder layer's `forward` and then "restoring" it with
# `module.forward = original_forward`, which leaves an instance-level `forward` attribute on each layer.
# The first compiled call guards that no such attribute exists; the second call finds it: one recompile.
# (fastvideo/models/encoders/gemma.py, fastvideo/pipelines/composed_pipeline_base.py and
# transformers/utils/generic.py::check_model_inputs, trimmed; Gemma3 itself is a tiny stand-in.)
import os
from collections import defaultdict
from dataclasses import dataclass
from functools import wraps
from typing import Any, Optional

import torch
from torch import nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- transformers/utils/generic.py (4.57): OutputRecorder + check_model_inputs -----------------------
_CAN_RECORD_REGISTRY = {}


@dataclass
class OutputRecorder:
    target_class: "type[torch.nn.Module]"
    index: int = 0
    layer_name: Optional[str] = None
    class_name: Optional[str] = None


def check_model_inputs(func):
    """
    Decorator to intercept specific layer outputs without using hooks.
    Compatible with torch.compile (Dynamo tracing).
    """

    @wraps(func)
    def wrapper(self, *args, **kwargs):
        use_cache = (
            kwargs["use_cache"] if kwargs.get("use_cache") is not None else getattr(self.config, "use_cache", None)
        )
        if use_cache is not None:
            kwargs["use_cache"] = use_cache

        return_dict = kwargs.pop("return_dict", None)
        if return_dict is None:
            return_dict = getattr(self.config, "return_dict", True)

        all_args = kwargs.copy()
        if "kwargs" in all_args:
            for k, v in all_args["kwargs"].items():
                all_args[k] = v

        capture_flags = _CAN_RECORD_REGISTRY.get(str(self.__class__), {})  # there is a weak ref for executorch
        recordable_keys = {
            f"output_{k}": all_args.get(
                f"output_{k}",
                getattr(
                    self.config,
                    f"output_{k}",
                    all_args.get("output_attentions", getattr(self.config, "output_attentions", False)),
                ),
            )
            for k in capture_flags
        }

        collected_outputs = defaultdict(tuple)
        monkey_patched_layers = []

        def make_capture_wrapper(module, orig_forward, key, index):
            @wraps(orig_forward)
            def wrapped_forward(*args, **kwargs):
                if key == "hidden_states" and len(collected_outputs[key]) == 0:
                    collected_outputs[key] += (args[0],)
                output = orig_forward(*args, **kwargs)
                if not isinstance(output, tuple):
                    collected_outputs[key] += (output,)
                elif output[index] is not None:
                    if key not in collected_outputs:
                        collected_outputs[key] = (output[index],)
                    else:
                        collected_outputs[key] += (output[index],)
                return output

            return wrapped_forward

        if any(recordable_keys.values()):
            capture_tasks = []
            for key, layer_specs in capture_flags.items():
                if not recordable_keys.get(f"output_{key}", False):
                    continue
                if not isinstance(layer_specs, list):
                    layer_specs = [layer_specs]
                for specs in layer_specs:
                    if not isinstance(specs, OutputRecorder):
                        index = 0 if "hidden_states" in key else 1
                        class_name = None if not isinstance(specs, str) else specs
                        target_class = specs if not isinstance(specs, str) else None
                        specs = OutputRecorder(target_class=target_class, index=index, class_name=class_name)
                    capture_tasks.append((key, specs))

            for name, module in self.named_modules():
                for key, specs in capture_tasks:
                    if (specs.target_class is not None and isinstance(module, specs.target_class)) or (
                        specs.class_name is not None and name.endswith(specs.class_name)
                    ):
                        if specs.layer_name is not None and specs.layer_name not in name:
                            continue
                        # Monkey patch forward
                        original_forward = module.forward
                        module.forward = make_capture_wrapper(module, original_forward, key, specs.index)
                        monkey_patched_layers.append((module, original_forward))

        outputs = func(self, *args, **kwargs)

        # Restore original forward methods
        for module, original_forward in monkey_patched_layers:
            module.forward = original_forward

        # Inject collected outputs into model output
        for key in collected_outputs:
            if key == "hidden_states":
                if hasattr(outputs, "last_hidden_state"):
                    collected_outputs[key] = collected_outputs[key][:-1]
                    collected_outputs[key] += (outputs.last_hidden_state,)
                outputs[key] = collected_outputs[key]
            else:
                outputs[key] = collected_outputs[key]
        return outputs

    return wrapper


class ModelOutput:
    """Stand-in for transformers.utils.ModelOutput (attribute and item access)."""

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)

    def __getitem__(self, key):
        return getattr(self, key)

    def __setitem__(self, key, value):
        setattr(self, key, value)


class BaseModelOutputWithPast(ModelOutput):
    pass


# ---- a tiny Gemma3 (stand-in for transformers' Gemma3ForConditionalGeneration) ---------------------------
@dataclass
class Gemma3TextConfig:
    vocab_size: int = 64
    hidden_size: int = 32
    intermediate_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    head_dim: int = 16
    query_pre_attn_scalar: int = 16
    rms_norm_eps: float = 1e-6
    use_cache: bool = False
    return_dict: bool = True
    output_attentions: bool = False
    output_hidden_states: bool = False


class Gemma3RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class Gemma3Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.scaling = config.query_pre_attn_scalar**-0.5
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)
        self.q_norm = Gemma3RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = Gemma3RMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask):
        b, t, _ = hidden_states.shape
        q = self.q_norm(self.q_proj(hidden_states).view(b, t, -1, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(hidden_states).view(b, t, -1, self.head_dim)).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, t, -1, self.head_dim).transpose(1, 2)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask, scale=self.scaling)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1)), None


class Gemma3MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class Gemma3DecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.self_attn = Gemma3Attention(config)
        self.mlp = Gemma3MLP(config)
        self.input_layernorm = Gemma3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = Gemma3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.pre_feedforward_layernorm = Gemma3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_feedforward_layernorm = Gemma3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, **kwargs):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, self_attn_weights = self.self_attn(hidden_states, attention_mask)
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.pre_feedforward_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = self.post_feedforward_layernorm(hidden_states)
        hidden_states = residual + hidden_states

        outputs = (hidden_states,)
        return outputs


class Gemma3TextModel(nn.Module):
    _can_record_outputs = {"hidden_states": Gemma3DecoderLayer, "attentions": Gemma3Attention}

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_scale = config.hidden_size**0.5
        self.layers = nn.ModuleList([Gemma3DecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = Gemma3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    @check_model_inputs
    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden_states = self.embed_tokens(input_ids) * self.embed_scale
        t = input_ids.shape[1]
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=input_ids.device))
        allowed = causal[None, None, :, :] & attention_mask[:, None, None, :].bool()
        mask = torch.zeros(allowed.shape, dtype=hidden_states.dtype, device=hidden_states.device)
        mask = mask.masked_fill(~allowed, torch.finfo(hidden_states.dtype).min)
        for decoder_layer in self.layers[: self.config.num_hidden_layers]:
            layer_outputs = decoder_layer(hidden_states, attention_mask=mask, **kwargs)
            hidden_states = layer_outputs[0]
        hidden_states = self.norm(hidden_states)
        return BaseModelOutputWithPast(last_hidden_state=hidden_states, past_key_values=None)


_CAN_RECORD_REGISTRY[str(Gemma3TextModel)] = Gemma3TextModel._can_record_outputs


class Gemma3Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.language_model = Gemma3TextModel(config)

    def forward(self, input_ids=None, attention_mask=None, output_hidden_states=None, return_dict=None, **kwargs):
        outputs = self.language_model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,
        )
        return BaseModelOutputWithPast(
            last_hidden_state=outputs.last_hidden_state,
            hidden_states=outputs.hidden_states if output_hidden_states else None,
        )


class Gemma3ForConditionalGeneration(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = Gemma3Model(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    @property
    def device(self):
        return next(self.parameters()).device

    def forward(self, input_ids=None, attention_mask=None, output_hidden_states=None, return_dict=None, **kwargs):
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,
        )
        logits = self.lm_head(outputs.last_hidden_state)
        return BaseModelOutputWithPast(logits=logits, hidden_states=outputs.hidden_states)

    @classmethod
    def from_pretrained(cls, path, local_files_only=True, torch_dtype=torch.float32):
        torch.manual_seed(0)  # stand-in for the checkpoint
        model = cls(Gemma3TextConfig())
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, 0.2)
        return model.to(torch_dtype)


# ---- fastvideo stand-ins ----------------------------------------------------------------------------------
def get_local_torch_device():
    return torch.device("cpu")


@dataclass
class BaseEncoderOutput:
    last_hidden_state: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple] = None
    attention_mask: Optional[torch.Tensor] = None


@dataclass
class GemmaArchConfig:
    gemma_model_path: str = "text_encoder/gemma"
    gemma_dtype: str = "float32"
    padding_side: str = "left"
    text_len: int = 16
    feature_extractor_in_features: int = 32 * 3
    feature_extractor_out_features: int = 32
    connector_num_attention_heads: int = 2
    connector_attention_head_dim: int = 16
    connector_num_layers: int = 2


@dataclass
class TextEncoderConfig:
    arch_config: GemmaArchConfig


class TextEncoder(nn.Module):
    def __init__(self, config: TextEncoderConfig) -> None:
        super().__init__()
        self.config = config


class FeedForward(nn.Module):
    def __init__(self, dim, dim_out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim_out))

    def forward(self, x):
        return self.net(x)


# ---- fastvideo/models/encoders/gemma.py --------------------------------------------------------------------
class GemmaFeaturesExtractorProjLinear(nn.Module):
    """Linear projection that aggregates stacked Gemma hidden states."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.aggregate_embed = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.aggregate_embed(x)


class _GemmaAttention(nn.Module):
    """Attention implementation aligned with LTX-2 text encoder."""

    def __init__(self, query_dim, context_dim, heads, dim_head, norm_eps) -> None:
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = query_dim if context_dim is None else context_dim
        self.heads = heads
        self.dim_head = dim_head
        self.q_norm = torch.nn.RMSNorm(inner_dim, eps=norm_eps)
        self.k_norm = torch.nn.RMSNorm(inner_dim, eps=norm_eps)
        self.to_q = nn.Linear(query_dim, inner_dim, bias=True)
        self.to_k = nn.Linear(context_dim, inner_dim, bias=True)
        self.to_v = nn.Linear(context_dim, inner_dim, bias=True)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, query_dim, bias=True), nn.Identity())

    def forward(self, x, context=None, mask=None):
        q = self.to_q(x)
        context = x if context is None else context
        k = self.to_k(context)
        v = self.to_v(context)

        q = self.q_norm(q)
        k = self.k_norm(k)

        b, q_len, _ = q.shape
        k_len = k.shape[1]
        q = q.view(b, q_len, self.heads, self.dim_head).transpose(1, 2)
        k = k.view(b, k_len, self.heads, self.dim_head).transpose(1, 2)
        v = v.view(b, k_len, self.heads, self.dim_head).transpose(1, 2)

        if mask is not None:
            if mask.ndim == 2:
                mask = mask.unsqueeze(0)
            if mask.ndim == 3:
                mask = mask.unsqueeze(1)

        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False
        )
        out = out.transpose(1, 2).reshape(b, q_len, -1)
        return self.to_out(out)


class _BasicTransformerBlock1D(nn.Module):
    """1D transformer block for connector processing."""

    def __init__(self, dim, heads, dim_head, norm_eps: float = 1e-6) -> None:
        super().__init__()
        self.attn1 = _GemmaAttention(query_dim=dim, context_dim=None, heads=heads, dim_head=dim_head, norm_eps=norm_eps)
        self.ff = FeedForward(dim, dim_out=dim)
        self.norm_eps = norm_eps

    def forward(self, hidden_states, attention_mask=None):
        norm_hidden_states = torch.nn.functional.rms_norm(hidden_states, (hidden_states.shape[-1],), eps=self.norm_eps)
        if norm_hidden_states.ndim == 4:
            norm_hidden_states = norm_hidden_states.squeeze(1)
        attn_output = self.attn1(norm_hidden_states, mask=attention_mask)
        hidden_states = attn_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        norm_hidden_states = torch.nn.functional.rms_norm(hidden_states, (hidden_states.shape[-1],), eps=self.norm_eps)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = ff_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        return hidden_states


class Embeddings1DConnector(nn.Module):
    """Transformer connector that refines Gemma embeddings for LTX-2."""

    def __init__(self, num_attention_heads, attention_head_dim, num_layers) -> None:
        super().__init__()
        self.inner_dim = num_attention_heads * attention_head_dim
        self.transformer_1d_blocks = nn.ModuleList(
            [
                _BasicTransformerBlock1D(dim=self.inner_dim, heads=num_attention_heads, dim_head=attention_head_dim)
                for _ in range(num_layers)
            ]
        )

    def forward(self, hidden_states, attention_mask=None):
        for block in self.transformer_1d_blocks:
            hidden_states = block(hidden_states, attention_mask=attention_mask)
        hidden_states = torch.nn.functional.rms_norm(hidden_states, (hidden_states.shape[-1],), eps=1e-6)
        return hidden_states, attention_mask


class LTX2GemmaTextEncoderModel(TextEncoder):
    def __init__(self, config: TextEncoderConfig) -> None:
        super().__init__(config)
        arch = config.arch_config

        self.feature_extractor_linear = GemmaFeaturesExtractorProjLinear(
            in_features=arch.feature_extractor_in_features,
            out_features=arch.feature_extractor_out_features,
        )
        self.embeddings_connector = Embeddings1DConnector(
            arch.connector_num_attention_heads, arch.connector_attention_head_dim, arch.connector_num_layers
        )
        self.audio_embeddings_connector = Embeddings1DConnector(
            arch.connector_num_attention_heads, arch.connector_attention_head_dim, arch.connector_num_layers
        )

        self.gemma_model_path = arch.gemma_model_path
        self.gemma_dtype = arch.gemma_dtype
        self.padding_side = arch.padding_side
        self._gemma_model: Gemma3ForConditionalGeneration | None = None

    def prepare_for_compile(self) -> None:
        # Load Gemma outside Dynamo so torch.compile does not trace HF file-system checks.
        _ = self.gemma_model

    @property
    def gemma_model(self) -> Gemma3ForConditionalGeneration:
        if self._gemma_model is None:
            gemma_path = self.gemma_model_path
            if not gemma_path:
                raise ValueError("gemma_model_path must be set (expected text_encoder/gemma).")
            dtype = getattr(torch, self.gemma_dtype, torch.bfloat16)
            self._gemma_model = Gemma3ForConditionalGeneration.from_pretrained(
                gemma_path,
                local_files_only=True,
                torch_dtype=dtype,
            )
            device = next(self.feature_extractor_linear.parameters()).device
            self._gemma_model.to(device=device)
            self._gemma_model.eval()
        return self._gemma_model

    def _run_feature_extractor(self, hidden_states, attention_mask, padding_side):
        encoded_text_features = torch.stack(hidden_states, dim=-1)
        encoded_text_features_dtype = encoded_text_features.dtype
        sequence_lengths = attention_mask.sum(dim=-1)
        normed_text_features = _norm_and_concat_padded_batch(
            encoded_text_features, sequence_lengths, padding_side=padding_side
        )
        return self.feature_extractor_linear(normed_text_features.to(encoded_text_features_dtype))

    def _convert_to_additive_mask(self, attention_mask, dtype):
        return (attention_mask - 1).to(dtype).reshape(
            (attention_mask.shape[0], 1, -1, attention_mask.shape[-1])
        ) * torch.finfo(dtype).max

    def _run_connectors(self, encoded_input, attention_mask):
        connector_attention_mask = self._convert_to_additive_mask(attention_mask, encoded_input.dtype)
        encoded, encoded_connector_attention_mask = self.embeddings_connector(encoded_input, connector_attention_mask)

        attention_mask = (encoded_connector_attention_mask < 0.000001).to(torch.int64)
        attention_mask = attention_mask.reshape([encoded.shape[0], encoded.shape[1], 1])
        encoded = encoded * attention_mask

        encoded_for_audio, _ = self.audio_embeddings_connector(encoded_input, connector_attention_mask)

        return encoded, encoded_for_audio, attention_mask.squeeze(-1)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BaseEncoderOutput:
        if input_ids is None:
            raise ValueError("input_ids is required for Gemma text encoding.")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)

        model = self.gemma_model
        target_device = get_local_torch_device()
        # Do not invoke model.to() inside the compiled forward path.
        if model.device != target_device:
            model.to(device=target_device)
        outputs = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=True,
            return_dict=True,
        )

        encoded_inputs = self._run_feature_extractor(
            outputs.hidden_states,
            attention_mask,
            padding_side=self.padding_side,
        )
        video_encoding, audio_encoding, attention_mask = self._run_connectors(encoded_inputs, attention_mask)

        hidden_states = (audio_encoding,) if output_hidden_states else None
        return BaseEncoderOutput(
            last_hidden_state=video_encoding,
            hidden_states=hidden_states,
            attention_mask=attention_mask,
        )


def _norm_and_concat_padded_batch(encoded_text, sequence_lengths, padding_side: str = "right"):
    b, t, d, l = encoded_text.shape
    device = encoded_text.device

    token_indices = torch.arange(t, device=device)[None, :]
    if padding_side == "right":
        mask = token_indices < sequence_lengths[:, None]
    elif padding_side == "left":
        start_indices = t - sequence_lengths[:, None]
        mask = token_indices >= start_indices
    else:
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side}")

    mask = mask.reshape(b, t, 1, 1)
    eps = 1e-6

    masked = encoded_text.masked_fill(~mask, 0.0)
    denom = (sequence_lengths * d).view(b, 1, 1, 1)
    mean = masked.sum(dim=(1, 2), keepdim=True) / (denom + eps)

    x_min = encoded_text.masked_fill(~mask, float("inf")).amin(dim=(1, 2), keepdim=True)
    x_max = encoded_text.masked_fill(~mask, float("-inf")).amax(dim=(1, 2), keepdim=True)
    range_ = x_max - x_min

    normed = 8 * (encoded_text - mean) / (range_ + eps)
    normed = normed.reshape(b, t, -1)

    mask_flattened = mask.reshape(b, t, 1).expand(-1, -1, d * l)
    normed = normed.masked_fill(~mask_flattened, 0.0)
    return normed


# ---- fastvideo/pipelines/composed_pipeline_base.py ----------------------------------------------------------
class ComposedPipelineBase:
    def __init__(self, modules):
        self.modules = modules

    @staticmethod
    def _compile_with_conditions(module: torch.nn.Module, compile_kwargs: dict[str, Any]) -> int:
        """Compile submodules that match module._compile_conditions."""
        compile_conditions = getattr(module, "_compile_conditions", None)
        if not compile_conditions:
            return 0

        compiled_count = 0
        for name, submodule in module.named_modules():
            if not name:
                continue
            if any(cond(name, submodule) for cond in compile_conditions):
                submodule.forward = torch.compile(submodule.forward, **compile_kwargs)
                compiled_count += 1
        return compiled_count

    def _maybe_compile_pipeline_module(self, module_name, fsdp_module_cls, compile_kwargs) -> None:
        if module_name not in self.modules:
            return

        module = self.modules[module_name]
        if fsdp_module_cls is not None and isinstance(module, fsdp_module_cls):
            return

        prepare_for_compile = getattr(module, "prepare_for_compile", None)
        if callable(prepare_for_compile):
            prepare_for_compile()

        compiled_count = self._compile_with_conditions(module, compile_kwargs)
        if compiled_count > 0:
            return

        # Backward-compatible fallback: compile full module if no condition matched.
        self.modules[module_name] = torch.compile(module, **compile_kwargs)


# ---- a tokenizer stand-in (byte-level, padding="max_length", left padding) ---------------------------------
def tokenize(prompts, max_length, padding_side="left", pad_id=0):
    ids, masks = [], []
    for p in prompts:
        tok = [1 + (c % 63) for c in p.encode("utf-8")][:max_length]
        pad = [pad_id] * (max_length - len(tok))
        ids.append(pad + tok if padding_side == "left" else tok + pad)
        masks.append(([0] * len(pad) + [1] * len(tok)) if padding_side == "left" else ([1] * len(tok) + [0] * len(pad)))
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(masks)}


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = TextEncoderConfig(arch_config=GemmaArchConfig())
    text_encoder = LTX2GemmaTextEncoderModel(config).eval()
    pipe = ComposedPipelineBase({"text_encoder": text_encoder})
    # Dreamverse's CompileConfig: backend="inductor", fullgraph=True, mode=..., dynamic=False
    pipe._maybe_compile_pipeline_module(
        module_name="text_encoder",
        fsdp_module_cls=None,
        compile_kwargs={"backend": counting_backend, "fullgraph": True, "dynamic": False},
    )
    text_encoder = pipe.modules["text_encoder"]

    requests = [
        ("a red fox runs through snow", "blurry"),
        ("waves at sunset", "low quality, distorted"),
        ("a city street at night, rain", ""),
    ]
    out = 0.0
    with torch.no_grad():
        for prompt, negative in requests:  # TextEncodingStage: positive then negative prompt
            for text in (prompt, negative):
                inputs = tokenize([text], config.arch_config.text_len, padding_side=config.arch_config.padding_side)
                outputs = text_encoder(
                    input_ids=inputs["input_ids"],
                    attention_mask=inputs["attention_mask"],
                    output_hidden_states=True,
                )
                out += outputs.last_hidden_state.float().sum().item() + outputs.hidden_states[0].float().sum().item()

    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {out:.4f}")
