"""vllm-ascend cc9fa5488c^ (PR #2532): `AscendMLATorchairImpl.running_in_graph` is
first created inside the compiled decode forward, and `_v_up_proj_and_o_proj`
tests `hasattr(self, "running_in_graph")` (vllm_ascend/torchair/torchair_mla.py).

Trimmed CPU reproduction: the NPU kernels (npu_fused_infer_attention_score,
KV-cache write, interleave rope, prefetch, stream switch) are stood in by plain
torch ops / no-ops, the attention attends over the batch's own tokens, and the
torchair backend is replaced by a counting backend. Only the torchair decode
(graph) path of `forward` is kept, with its `running_in_graph` control flow.
"""
import enum
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# --- stand-ins for vllm / torch_npu helpers -----------------------------------
class AscendAttentionState(enum.Enum):
    PrefillNoCache = 0
    PrefillCacheHit = 1
    DecodeOnly = 2
    ChunkedPrefill = 3
    SpecDecoding = 4


def npu_prefetch(input, dependency, max_size=0, *, enabled=True):
    return


def npu_stream_switch(tag, priority, *, enabled=True):
    return nullcontext()


def npu_wait_tensor(self, dependency, *, enabled=True):
    return self


def get_multistream_comm_context():
    return None


class LinearBase(torch.nn.Module):  # vLLM linear layers return (output, bias)

    def __init__(self, input_size, output_size):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(output_size, input_size) * 0.2)

    def forward(self, x, is_prefill=True):
        return x @ self.weight.t(), None


class RMSNorm(torch.nn.Module):

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.variance_epsilon) * self.weight


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@dataclass
class AscendMLATorchairDecodeMetadata:
    cos: torch.Tensor
    sin: torch.Tensor


@dataclass
class AscendMLATorchairMetadata:
    attn_state: AscendAttentionState
    num_actual_tokens: int
    num_decodes: int
    num_prefills: int
    num_decode_tokens: int
    slot_mapping: torch.Tensor
    decode: Optional[AscendMLATorchairDecodeMetadata] = None


# --- vllm_ascend/torchair/torchair_mla.py before the fix ----------------------
class AscendMLATorchairImpl:

    def __init__(self, num_heads, head_size, scale, num_kv_heads, **kwargs) -> None:
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads

        # MLA Args
        self.kv_lora_rank = kwargs['kv_lora_rank']
        self.qk_nope_head_dim = kwargs['qk_nope_head_dim']
        self.qk_rope_head_dim = kwargs['qk_rope_head_dim']
        self.qk_head_dim = kwargs['qk_head_dim']
        self.v_head_dim = kwargs['v_head_dim']
        self.q_proj = kwargs['q_proj']
        self.kv_b_proj = kwargs['kv_b_proj']
        self.o_proj = kwargs['o_proj']
        self.kv_a_proj_with_mqa = kwargs.get('kv_a_proj_with_mqa', None)
        self.kv_a_layernorm = kwargs.get('kv_a_layernorm', None)

        self.torchair_graph_enabled = True  # ascend_config.torchair_graph_config.enabled
        self.enable_kv_nz = False
        self.enable_shared_expert_dp = False

    def _v_up_proj_and_o_proj(self, x, enable_multistream_mla: bool = False):
        # Convert from (B, N, L) to (N, B, L)
        x = x.view(-1, self.num_heads, self.kv_lora_rank).transpose(0, 1)
        # Multiply (N, B, L) x (N, L, V) -> (N, B, V)
        x = torch.bmm(x, self.W_UV)
        # Convert from (N, B, V) to (B, N * V)
        x = x.transpose(0, 1).reshape(-1, self.num_heads * self.v_head_dim)
        if hasattr(self, "running_in_graph") and not self.running_in_graph:
            return x
        MAX_O_PROJ_PREFETCH_SIZE = 16 * 1024 * 1024  # 16MB
        npu_prefetch(self.o_proj.weight, x, max_size=MAX_O_PROJ_PREFETCH_SIZE, enabled=enable_multistream_mla)
        return self.o_proj(x, is_prefill=False)[0]

    # Return `ql_nope`, `q_pe`
    def _q_proj_and_k_up_proj(self, x):
        q_nope, q_pe = self.q_proj(x)[0]\
            .view(-1, self.num_heads, self.qk_head_dim)\
            .split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)

        # Convert from (B, N, P) to (N, B, P)
        q_nope = q_nope.transpose(0, 1)
        # Multiply (N, B, P) x (N, P, L) -> (N, B, L)
        ql_nope = torch.bmm(q_nope, self.W_UK_T)
        # Convert from (N, B, L) to (B, N, L)
        return ql_nope.transpose(0, 1), q_pe

    def process_weights_after_loading(self, act_dtype: torch.dtype):
        kv_b_proj_weight = self.kv_b_proj.weight.T
        kv_b_proj_weight = kv_b_proj_weight.view(
            self.kv_lora_rank,
            self.num_heads,
            self.qk_nope_head_dim + self.v_head_dim,
        )
        W_UK, W_UV = kv_b_proj_weight.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        # Convert from (L, N, V) to (N, L, V)
        self.W_UV = W_UV.transpose(0, 1).contiguous().detach()
        # Convert from (L, N, P) to (N, P, L)
        self.W_UK_T = W_UK.permute(1, 2, 0).contiguous().detach()

    def exec_kv(self, hidden_states, cos, sin, kv_cache, slots):
        # stand-in for torch_npu.npu_kv_rmsnorm_rope_cache (no cache write here)
        kv = self.kv_a_proj_with_mqa(hidden_states)[0]
        k_nope, k_pe = kv.split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        k_nope = self.kv_a_layernorm(k_nope).unsqueeze(1)
        k_pe = self.rope_single(k_pe.unsqueeze(1), cos, sin)
        return k_pe, k_nope, kv

    def rope_single(self, x, cos, sin):
        # stand-in for torch_npu.npu_interleave_rope
        return x * cos + _rotate_half(x) * sin

    def _forward_decode(self, q_nope, q_pe, k_nope, k_pe, kv_c_and_k_pe_cache, attn_metadata,
                        enable_multistream_mla: bool = False) -> torch.Tensor:
        decode_meta = attn_metadata.decode
        assert decode_meta is not None
        num_tokens = q_nope.size(0)
        if self.running_in_graph or self.running_chunkprefilll_with_torchair:
            # stand-in for torch_npu.npu_fused_infer_attention_score (MLA: values are the latent k_nope)
            scores = (torch.einsum('tnl,sl->nts', q_nope, k_nope[:, 0]) +
                      torch.einsum('tnr,sr->nts', q_pe, k_pe[:, 0])) * self.scale
            attn_output = torch.einsum('nts,sl->tnl', scores.softmax(-1), k_nope[:, 0])
        else:
            raise NotImplementedError("eager paged-attention path not reproduced")
        current_ms_metadata = get_multistream_comm_context()
        if current_ms_metadata is None:
            return self._v_up_proj_and_o_proj(attn_output, enable_multistream_mla)

    def forward(
        self,
        layer,
        hidden_states_or_q_c: torch.Tensor,  # query in unified attn
        hidden_states_or_kv_c_normed: torch.Tensor,  # key in unified attn
        k_pe: torch.Tensor,  # value in unified attn
        kv_cache: Tuple[torch.Tensor],
        attn_metadata,
        output: Optional[torch.Tensor] = None,
        enable_multistream_mla: bool = False,
        ckq: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        assert output is not None, "Output tensor must be provided."
        if attn_metadata is None:
            # Profiling run.
            return output
        self.running_in_graph = self.torchair_graph_enabled and attn_metadata.attn_state in [
            AscendAttentionState.DecodeOnly, AscendAttentionState.SpecDecoding
        ]
        self.running_chunkprefilll_with_torchair = self.torchair_graph_enabled and attn_metadata.attn_state == AscendAttentionState.ChunkedPrefill
        num_actual_toks = attn_metadata.num_actual_tokens
        if k_pe is None and not self.running_in_graph:
            raise NotImplementedError("eager path not reproduced")
        else:
            kv_c_normed = hidden_states_or_kv_c_normed
        has_decode = attn_metadata.num_decodes > 0
        has_prefill = attn_metadata.num_prefills > 0
        num_decode_tokens = attn_metadata.num_decode_tokens
        if not self.running_in_graph:
            raise NotImplementedError("eager path not reproduced")
        else:
            decode_hs_or_q_c = hidden_states_or_q_c
        if has_decode:
            decode_k_nope = None
            assert attn_metadata.decode is not None
            if self.running_in_graph or self.running_chunkprefilll_with_torchair:
                cos = attn_metadata.decode.cos
                sin = attn_metadata.decode.sin
                with npu_stream_switch("mla_secondary", 0, enabled=enable_multistream_mla):
                    npu_wait_tensor(hidden_states_or_kv_c_normed, ckq, enabled=enable_multistream_mla)
                    decode_k_pe, decode_k_nope, decode_kv = self.exec_kv(hidden_states_or_kv_c_normed, cos, sin,
                                                                         kv_cache, attn_metadata.slot_mapping)
            decode_ql_nope, decode_q_pe = \
                self._q_proj_and_k_up_proj(decode_hs_or_q_c)
            if self.running_in_graph:
                with npu_stream_switch("mla_secondary", 0, enabled=enable_multistream_mla):
                    npu_wait_tensor(decode_q_pe, decode_k_pe, enabled=enable_multistream_mla)
                    decode_q_pe = self.rope_single(decode_q_pe, cos, sin)
        assert len(kv_cache) > 1, "the number of kv cache should be greater than 1, namely (nope_cache and rope_cache)"
        if has_decode:
            if self.running_in_graph:
                return self._forward_decode(decode_ql_nope, decode_q_pe, decode_k_nope, decode_k_pe, kv_cache,
                                            attn_metadata, enable_multistream_mla)


# --- a tiny torchair DeepSeek-V2 decoder --------------------------------------
class Attention(torch.nn.Module):  # vllm.attention.Attention holding the impl

    def __init__(self, impl):
        super().__init__()
        self.impl = impl


class TorchairDeepseekV2MLAAttention(torch.nn.Module):

    def __init__(self, hidden=16, num_heads=2, kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4,
                 v_head_dim=4):
        super().__init__()
        qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.q_proj = LinearBase(hidden, num_heads * qk_head_dim)
        self.kv_a_proj_with_mqa = LinearBase(hidden, kv_lora_rank + qk_rope_head_dim)
        self.kv_a_layernorm = RMSNorm(kv_lora_rank)
        self.kv_b_proj = LinearBase(kv_lora_rank, num_heads * (qk_nope_head_dim + v_head_dim))
        self.o_proj = LinearBase(num_heads * v_head_dim, hidden)
        impl = AscendMLATorchairImpl(num_heads, kv_lora_rank + qk_rope_head_dim, qk_head_dim**-0.5, 1,
                                     kv_lora_rank=kv_lora_rank, qk_nope_head_dim=qk_nope_head_dim,
                                     qk_rope_head_dim=qk_rope_head_dim, qk_head_dim=qk_head_dim,
                                     v_head_dim=v_head_dim, q_proj=self.q_proj, kv_b_proj=self.kv_b_proj,
                                     o_proj=self.o_proj, kv_a_proj_with_mqa=self.kv_a_proj_with_mqa,
                                     kv_a_layernorm=self.kv_a_layernorm)
        self.mla_attn = Attention(impl)

    def forward(self, positions, hidden_states, kv_cache, attn_metadata):
        output = torch.zeros_like(hidden_states)
        return self.mla_attn.impl.forward(self.mla_attn, hidden_states, hidden_states, None, kv_cache,
                                          attn_metadata, output=output)


class TorchairDeepseekV2Model(torch.nn.Module):

    def __init__(self, vocab=32, hidden=16, num_layers=2):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, hidden)
        self.layers = torch.nn.ModuleList(TorchairDeepseekV2MLAAttention(hidden) for _ in range(num_layers))
        self.norm = RMSNorm(hidden)

    def forward(self, input_ids, positions, kv_caches, attn_metadata):
        hidden_states = self.embed_tokens(input_ids)
        for i, layer in enumerate(self.layers):
            hidden_states = hidden_states + layer(positions, self.norm(hidden_states), kv_caches[i], attn_metadata)
        return self.norm(hidden_states)


def decode_metadata(num_tokens, positions, rope_dim=4):
    inv_freq = 1.0 / (10000**(torch.arange(0, rope_dim, 2).float() / rope_dim))
    freqs = torch.outer(positions.float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return AscendMLATorchairMetadata(attn_state=AscendAttentionState.DecodeOnly, num_actual_tokens=num_tokens,
                                     num_decodes=num_tokens, num_prefills=0, num_decode_tokens=num_tokens,
                                     slot_mapping=torch.arange(num_tokens),
                                     decode=AscendMLATorchairDecodeMetadata(cos=emb.cos().unsqueeze(1),
                                                                            sin=emb.sin().unsqueeze(1)))


torch.manual_seed(0)
model = TorchairDeepseekV2Model().eval()
for layer in model.layers:
    layer.mla_attn.impl.process_weights_after_loading(torch.float32)
kv_caches = [(torch.zeros(1, 4, 8), torch.zeros(1, 4, 4)) for _ in model.layers]

# TorchairModelRunner._get_torchair_lazy_compiled_model: decode runs go through the compiled model
compiled_model = torch.compile(model, dynamic=True, fullgraph=True, backend=counting_backend)

out = 0.0
with torch.no_grad():
    # profile run (eager, attn_metadata=None: the impl returns before touching running_in_graph)
    model(torch.zeros(8, dtype=torch.long), torch.arange(8), kv_caches, None)
    # graph capture for each torchair graph batch size, then decode steps
    for step, bs in enumerate([5, 7, 5, 7, 5]):
        input_ids = torch.randint(0, 32, (bs, ))
        positions = torch.randint(0, 64, (bs, ))
        hidden = compiled_model(input_ids, positions, kv_caches, decode_metadata(bs, positions))
        if step >= 2:
            out += hidden.sum().item()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
