# Reproduction of mstar-project/mstar AFTER ef2310106ccc ("engine: make torch.compile dynamic=False
# opt-in"): StatelessEngine._apply_torch_compile now compiles each submodule forward with
# dynamic=getattr(submodule, "torch_compile_dynamic", None), i.e. automatic dynamic shapes unless the
# submodule opts into static specialization; Higgs-Audio's encoder does not, so after one recompile its
# audio length is symbolic.
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

GRAPHS = 0


def counting_backend(gm, example_inputs):  # mstar: default backend ("inductor")
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ----------------------------------------------------------------------------------------------------
# mstar/model/higgs_audio/config.py (trimmed)
# ----------------------------------------------------------------------------------------------------
@dataclass
class HiggsAudioModelConfig:
    audio_d_model: int = 16
    audio_encoder_layers: int = 2
    audio_encoder_attention_heads: int = 2
    audio_encoder_ffn_dim: int = 32
    audio_num_mel_bins: int = 8
    audio_max_source_positions: int = 64
    projector_temporal_downsample: int = 2
    hidden_size: int = 16

    def encoder_output_length(self, mel_len: int) -> int:
        """Valid audio-embedding count for ``mel_len`` mel frames:
        conv2 (stride 2) -> avg_pool (stride 2) -> projector conv (stride 2)."""
        after_conv = (mel_len - 1) // 2 + 1
        after_pool = (after_conv - 2) // 2 + 1
        return (after_pool - 1) // self.projector_temporal_downsample + 1


# ----------------------------------------------------------------------------------------------------
# transformers.models.whisper.modeling_whisper (trimmed: WhisperAttention sdpa path, WhisperEncoderLayer,
# transformers-5 API that returns the tensor). Stand-in for the imported transformers classes.
# ----------------------------------------------------------------------------------------------------
class WhisperAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=True)

    def forward(self, hidden_states, attention_mask=None):
        bsz, tgt_len = hidden_states.shape[:-1]
        q_input_shape = (bsz, tgt_len, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(*q_input_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(*q_input_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(*q_input_shape).transpose(1, 2)
        attn_output = F.scaled_dot_product_attention(
            query_states, key_states, value_states, attn_mask=attention_mask, scale=self.scaling
        )
        attn_output = attn_output.transpose(1, 2).reshape(bsz, tgt_len, -1).contiguous()
        return self.out_proj(attn_output), None


class WhisperEncoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, ffn_dim: int):
        super().__init__()
        self.self_attn = WhisperAttention(d_model, heads)
        self.self_attn_layer_norm = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, d_model)
        self.final_layer_norm = nn.LayerNorm(d_model)

    def forward(self, hidden_states, attention_mask):
        residual = hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = F.gelu(self.fc1(hidden_states))
        hidden_states = self.fc2(hidden_states)
        return residual + hidden_states


# ----------------------------------------------------------------------------------------------------
# mstar/model/higgs_audio/components/audio_tower.py
# ----------------------------------------------------------------------------------------------------
class HiggsAudioTower(nn.Module):
    def __init__(self, config: HiggsAudioModelConfig):
        super().__init__()
        embed_dim = config.audio_d_model
        self.conv1 = nn.Conv1d(config.audio_num_mel_bins, embed_dim, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(embed_dim, embed_dim, kernel_size=3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(config.audio_max_source_positions, embed_dim)
        self.embed_positions.requires_grad_(False)
        self.layers = nn.ModuleList(
            [WhisperEncoderLayer(embed_dim, config.audio_encoder_attention_heads, config.audio_encoder_ffn_dim)
             for _ in range(config.audio_encoder_layers)]
        )
        self.avg_pooler = nn.AvgPool1d(2, stride=2)
        self.layer_norm = nn.LayerNorm(embed_dim)

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        """(batch, num_mel_bins, T_mel) -> (batch, ~T_mel/4, d_model)."""
        hidden = F.gelu(self.conv1(input_features))
        hidden = F.gelu(self.conv2(hidden))
        hidden = hidden.permute(0, 2, 1)  # (B, T, D)
        hidden = hidden + self.embed_positions.weight[: hidden.shape[1]]
        for layer in self.layers:
            hidden = layer(hidden, None)
        hidden = self.avg_pooler(hidden.permute(0, 2, 1)).permute(0, 2, 1)
        return self.layer_norm(hidden)


class HiggsAudioFeatureProjector(nn.Module):
    def __init__(self, config: HiggsAudioModelConfig):
        super().__init__()
        audio_dim = config.audio_d_model
        self.temporal = nn.Conv1d(audio_dim, audio_dim, 3, 2, padding=1, groups=audio_dim, bias=True)
        self.linear1 = nn.Linear(audio_dim, 2048, bias=True)
        self.linear2 = nn.Linear(2048, config.hidden_size, bias=True)

    def forward(self, audio_features: torch.Tensor) -> torch.Tensor:
        """(B, T, audio_dim) -> (B, ceil(T/2), hidden_size)."""
        x = self.temporal(audio_features.permute(0, 2, 1)).permute(0, 2, 1)
        return self.linear2(F.relu(self.linear1(x)))


# ----------------------------------------------------------------------------------------------------
# mstar/model/submodule_base.py (trimmed)
# ----------------------------------------------------------------------------------------------------
@dataclass
class NodeInputs:
    tensor_inputs: dict = field(default_factory=dict)
    kwargs: dict = field(default_factory=dict)


@dataclass
class ModelInputsFromEngine:
    request_ids: list
    per_request_info: dict
    cache_manager: object = None
    piecewise_runners: dict = field(default_factory=dict)


class NodeSubmodule(torch.nn.Module):
    disable_torch_compile: bool = False

    def get_device(self):
        return next(self.parameters()).device

    def preprocess(self, graph_walk, engine_inputs, inputs):
        if len(inputs) > 1:
            raise NotImplementedError(f"Batching not implemented for submodule {self.__class__.__name__}")
        return {**inputs[0].tensor_inputs, **inputs[0].kwargs}


# ----------------------------------------------------------------------------------------------------
# mstar/model/higgs_audio/submodules.py: HiggsAudioEncoderSubmodule (enc_dec engine)
# ----------------------------------------------------------------------------------------------------
class HiggsAudioEncoderSubmodule(NodeSubmodule):
    """Audio tower + projector: (num_chunks, num_mel_bins, T) mels padded to the longest chunk ->
    concatenated LLM-space audio embeddings (total_audio_tokens, hidden_size)."""

    def __init__(self, audio_tower: nn.Module, projector: nn.Module, config: HiggsAudioModelConfig):
        super().__init__()
        self.audio_tower = audio_tower
        self.projector = projector
        self.config = config

    def prepare_inputs(self, graph_walk, fwd_info, inputs, **kwargs) -> NodeInputs:
        return NodeInputs(
            tensor_inputs={
                "audio_features": inputs["audio_features"][0],
                "audio_feature_lens": inputs["audio_feature_lens"][0],
            }
        )

    def forward(self, graph_walk, engine_inputs, audio_features, audio_feature_lens, **kwargs):
        device = self.get_device()
        dtype = next(self.audio_tower.parameters()).dtype
        feats = audio_features.to(device=device, dtype=dtype)
        if feats.dim() == 2:
            feats = feats.unsqueeze(0)  # (1, num_mel_bins, T)

        encoded = self.audio_tower(feats)         # (num_chunks, T_out, 1280)
        projected = self.projector(encoded)       # (num_chunks, T', hidden)

        chunks = []
        for i, mel_len in enumerate(audio_feature_lens.tolist()):
            valid = self.config.encoder_output_length(int(mel_len))
            chunks.append(projected[i, :valid])
        audio_embeds = torch.cat(chunks, dim=0)   # (total_audio_tokens, hidden)

        return {"audio_embeds": [audio_embeds]}


# ----------------------------------------------------------------------------------------------------
# mstar/engine/stateless_engine.py (trimmed): StatelessEngine with the enc_dec config
# ----------------------------------------------------------------------------------------------------
@dataclass
class StatelessEngineConfig:
    name: str
    autocast_dtype: torch.dtype | None = None
    apply_torch_compile: bool = True
    cuda_graph_capable: bool = False
    enable_piecewise_runner: bool = False


def make_enc_dec_config(autocast_dtype):
    return StatelessEngineConfig(name="enc_dec", autocast_dtype=autocast_dtype, apply_torch_compile=True)


class StatelessEngine:
    def __init__(self, config: StatelessEngineConfig, submodules: dict):
        self.config = config
        self.submodules = submodules

    def warmup(self) -> None:
        """Apply ``torch.compile`` (the real one returns early without CUDA; the CUDA-graph steps are
        off for this submodule)."""
        for node_name, submodule in self.submodules.items():
            if self.config.apply_torch_compile:
                self._apply_torch_compile(node_name, submodule)

    def _apply_torch_compile(self, node_name: str, submodule: NodeSubmodule) -> None:
        if getattr(submodule, "disable_torch_compile", False):
            return
        # ``dynamic`` defaults to None (Inductor decides). A submodule whose
        # forward only ever sees a fixed set of shapes -- e.g. one driven by
        # piecewise capture buckets -- can set ``torch_compile_dynamic = False``
        # to force static specialization. Leaving the default is important for
        # variable-shape submodules, which would otherwise recompile per shape.
        dynamic = getattr(submodule, "torch_compile_dynamic", None)
        try:
            if hasattr(submodule, "forward"):
                submodule.forward = torch.compile(
                    submodule.forward,
                    fullgraph=False,
                    dynamic=dynamic,
                    backend=counting_backend,
                )
            # forward_batched is intentionally left eager
        except Exception:
            pass

    @torch.inference_mode()
    def _execute_sequential(self, node_name: str, request_ids, inputs):
        submodule = self.submodules[node_name]
        outputs = {}
        for i, rid in enumerate(request_ids):
            engine_inputs = ModelInputsFromEngine(request_ids=[rid], per_request_info={rid: None})
            node_input = submodule.prepare_inputs("prefill", None, inputs[i])
            preprocessed = submodule.preprocess(graph_walk="prefill", engine_inputs=engine_inputs,
                                                inputs=[node_input])
            outputs[rid] = submodule.forward(graph_walk="prefill", engine_inputs=engine_inputs, **preprocessed)
        return outputs


# ----------------------------------------------------------------------------------------------------
# Driver: HiggsAudioModel._create_encoder_submodule + process_prompt stand-in (one clip shorter than a
# chunk per request, so its mel is (1, mels, T) with T = the clip's frame count), five requests served
# by the enc_dec engine.
# ----------------------------------------------------------------------------------------------------
torch.manual_seed(0)
config = HiggsAudioModelConfig()
encoder = HiggsAudioEncoderSubmodule(HiggsAudioTower(config), HiggsAudioFeatureProjector(config), config).eval()
engine = StatelessEngine(make_enc_dec_config(None), {"audio_encoder": encoder})
engine.warmup()

mel_lengths = [40, 56, 48, 64, 44]
requests = []
for n, T in enumerate(mel_lengths):
    audio_features = torch.randn(1, config.audio_num_mel_bins, T)  # feature_extractor(..., padding="longest")
    audio_feature_lens = torch.ones(1, T, dtype=torch.long).sum(-1)
    requests.append({"audio_features": [audio_features], "audio_feature_lens": [audio_feature_lens]})
outs = engine._execute_sequential("audio_encoder", [f"req_{n}" for n in range(len(requests))], requests)
checksum = sum(float(o["audio_embeds"][0].sum()) * (k + 1) for k, o in enumerate(outs.values()))
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
