"""vllm-gaudi 7e7adbe6 (PR #1329), the fix: `HpuQwen3MoeModel` (swapped in by `HpuQwen3MoeForCausalLM`, registered
for "Qwen3MoeForCausalLM") starts the decoder loop with `residual = torch.zeros_like(hidden_states)`, so every
layer takes the same branch. Before the fix: vLLM's `Qwen3MoeModel.forward` starts the decoder loop with
`residual = None`, and `Qwen3MoeDecoderLayer.forward` branches on `if residual is None:`; the decoder layers,
compiled one by one by the HPU model runner's regional compilation (all sharing one `forward`), so compile
one graph for layer 0 (`residual is None`) and another for every later layer (a tensor), per prompt shape.

Trimmed CPU reproduction of vllm (fused_moe/layer.py, custom_op.py, forward_context.py,
models/qwen3_moe.py) and vllm-gaudi (models/qwen3_moe.py, ops/hpu_fused_moe.py, extension/ops.py,
v1/worker/hpu_model_runner.py, utils.py). HPU kernels are CPU stand-ins.
"""
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn
from torch.library import Library

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---------------------------------------------------------------- vllm/utils (direct_register_custom_op)
vllm_lib = Library("vllm", "FRAGMENT")  # noqa


def direct_register_custom_op(op_name, op_func, mutates_args=None, fake_impl=None, target_lib=None,
                              dispatch_key="CPU", tags=()):
    schema_str = torch.library.infer_schema(op_func, mutates_args=mutates_args or [])
    my_lib = target_lib or vllm_lib
    my_lib.define(op_name + schema_str, tags=tags)
    my_lib.impl(op_name, op_func, dispatch_key=dispatch_key)
    if fake_impl is not None:
        my_lib._register_fake(op_name, fake_impl)


# ---------------------------------------------------------------- vllm/config (trimmed)
class CompilationConfig:
    def __init__(self):
        # Per-model forward context
        # Map from layer name to layer objects that need to be accessed outside
        # model code, e.g., Attention, FusedMOE when dp_size>1.
        self.static_forward_context: dict[str, Any] = {}


class VllmConfig:
    def __init__(self):
        self.compilation_config = CompilationConfig()


_current_vllm_config = VllmConfig()


def get_current_vllm_config():
    return _current_vllm_config


# ---------------------------------------------------------------- vllm/forward_context.py (trimmed)
@dataclass
class ForwardContext:
    # copy from vllm_config.compilation_config.static_forward_context
    no_compile_layers: dict[str, Any]
    attn_metadata: Any
    virtual_engine: int


_forward_context: Optional[ForwardContext] = None


def get_forward_context() -> ForwardContext:
    assert _forward_context is not None, ("Forward context is not set. "
                                          "Please use `set_forward_context` to set the forward context.")
    return _forward_context


@contextmanager
def set_forward_context(attn_metadata: Any, vllm_config: VllmConfig, virtual_engine: int = 0):
    global _forward_context
    prev_context = _forward_context
    _forward_context = ForwardContext(
        no_compile_layers=vllm_config.compilation_config.static_forward_context,
        virtual_engine=virtual_engine,
        attn_metadata=attn_metadata)
    try:
        yield
    finally:
        _forward_context = prev_context


# ---------------------------------------------------------------- vllm/model_executor/custom_op.py (trimmed)
class CustomOp(nn.Module):
    """
    Base class for custom ops.
    Dispatches the forward method to the appropriate backend.
    """

    def __new__(cls, *args, **kwargs):
        op_name = cls.__name__
        if op_name not in cls.op_registry_oot:
            op_cls_to_instantiate = cls
        else:
            op_cls_to_instantiate = cls.op_registry_oot[op_name]
        return super().__new__(op_cls_to_instantiate)

    def __init__(self):
        super().__init__()
        self._forward_method = self.dispatch_forward()

    def forward(self, *args, **kwargs):
        return self._forward_method(*args, **kwargs)

    def forward_native(self, *args, **kwargs):
        raise NotImplementedError

    def forward_oot(self, *args, **kwargs):
        # By default, we assume that OOT ops are compatible with the
        # PyTorch-native implementation.
        return self.forward_native(*args, **kwargs)

    def dispatch_forward(self):
        # the HPU platform is an out-of-tree platform (current_platform.is_out_of_tree())
        return self.forward_oot

    op_registry: dict[str, type['CustomOp']] = {}
    op_registry_oot: dict[str, type['CustomOp']] = {}

    @classmethod
    def register_oot(cls, _decorated_op_cls=None, name: Optional[str] = None):

        def decorator(op_cls):
            reg_name = name if name is not None else cls.__name__
            assert reg_name not in cls.op_registry_oot, \
                f"Duplicate op name: {reg_name}"
            op_cls.name = reg_name
            cls.op_registry_oot[reg_name] = op_cls
            return op_cls

        if _decorated_op_cls is None:
            return decorator
        elif isinstance(_decorated_op_cls, type):
            return decorator(_decorated_op_cls)
        else:
            raise TypeError("Decorator can only be applied to classes.")


# ---------------------------------------------------------------- vllm/model_executor/layers/fused_moe/layer.py (trimmed)
class UnquantizedFusedMoEMethod(CustomOp):
    """MoE method without quantization."""

    def create_weights(self, layer: torch.nn.Module, num_experts: int, hidden_size: int,
                       intermediate_size_per_partition: int, params_dtype: torch.dtype, **extra_weight_attrs):
        # Fused gate_up_proj (column parallel)
        w13_weight = torch.nn.Parameter(torch.empty(num_experts, 2 * intermediate_size_per_partition, hidden_size,
                                                    dtype=params_dtype),
                                        requires_grad=False)
        layer.register_parameter("w13_weight", w13_weight)
        # down_proj (row parallel)
        w2_weight = torch.nn.Parameter(torch.empty(num_experts, hidden_size, intermediate_size_per_partition,
                                                   dtype=params_dtype),
                                       requires_grad=False)
        layer.register_parameter("w2_weight", w2_weight)

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        pass

    def apply(
        self,
        layer: torch.nn.Module,
        x: torch.Tensor,
        router_logits: torch.Tensor,
        top_k: int,
        renormalize: bool,
        use_grouped_topk: bool = False,
        topk_group: Optional[int] = None,
        num_expert_group: Optional[int] = None,
        global_num_experts: int = -1,
        expert_map: Optional[torch.Tensor] = None,
        custom_routing_function: Optional[Callable] = None,
        scoring_func: str = "softmax",
        routed_scaling_factor: float = 1.0,
        e_score_correction_bias: Optional[torch.Tensor] = None,
        apply_router_weight_on_input: bool = False,
        activation: str = "silu",
    ) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        return self.forward(
            x=x,
            layer=layer,
            router_logits=router_logits,
            top_k=top_k,
            renormalize=renormalize,
            use_grouped_topk=use_grouped_topk,
            topk_group=topk_group,
            num_expert_group=num_expert_group,
            global_num_experts=global_num_experts,
            expert_map=expert_map,
            custom_routing_function=custom_routing_function,
            scoring_func=scoring_func,
            e_score_correction_bias=e_score_correction_bias,
            activation=activation,
            apply_router_weight_on_input=apply_router_weight_on_input,
        )


class FusedMoE(CustomOp):
    """FusedMoE layer for MoE models."""

    def __init__(
        self,
        num_experts: int,  # Global number of experts
        top_k: int,
        hidden_size: int,
        intermediate_size: int,
        params_dtype: Optional[torch.dtype] = None,
        reduce_results: bool = False,
        renormalize: bool = True,
        use_grouped_topk: bool = False,
        num_expert_group: Optional[int] = None,
        topk_group: Optional[int] = None,
        tp_size: Optional[int] = None,
        dp_size: Optional[int] = None,
        prefix: str = "",
        custom_routing_function: Optional[Callable] = None,
        scoring_func: str = "softmax",
        routed_scaling_factor: float = 1.0,
        e_score_correction_bias: Optional[torch.Tensor] = None,
        apply_router_weight_on_input: bool = False,
        activation: str = "silu",
    ):
        super().__init__()
        if params_dtype is None:
            params_dtype = torch.get_default_dtype()
        self.params_dtype = params_dtype
        vllm_config = get_current_vllm_config()
        self.tp_size = tp_size if tp_size is not None else 1
        self.dp_size = dp_size if dp_size is not None else 1
        self.ep_size = 1
        self.ep_rank = 0
        self.global_num_experts = num_experts
        self.local_num_experts = num_experts
        self.expert_map = None
        self.top_k = top_k
        self.hidden_size = hidden_size
        self.shared_experts = None

        compilation_config = vllm_config.compilation_config
        if prefix in compilation_config.static_forward_context:
            raise ValueError("Duplicate layer name: {}".format(prefix))
        compilation_config.static_forward_context[prefix] = self
        self.layer_name = prefix

        self.intermediate_size_per_partition = intermediate_size // self.tp_size
        self.reduce_results = reduce_results
        self.renormalize = renormalize
        self.use_grouped_topk = use_grouped_topk
        self.num_expert_group = num_expert_group
        self.topk_group = topk_group
        self.custom_routing_function = custom_routing_function
        self.scoring_func = scoring_func
        self.routed_scaling_factor = routed_scaling_factor
        self.e_score_correction_bias = e_score_correction_bias
        self.apply_router_weight_on_input = apply_router_weight_on_input
        self.activation = activation

        self.quant_method = UnquantizedFusedMoEMethod()  # -> HPUUnquantizedFusedMoEMethod (register_oot)
        self.quant_method.create_weights(layer=self, num_experts=self.local_num_experts, hidden_size=hidden_size,
                                         intermediate_size_per_partition=self.intermediate_size_per_partition,
                                         params_dtype=params_dtype)

    def forward_native(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
    ) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        og_hidden_states = hidden_states.shape[-1]
        if self.hidden_size != og_hidden_states:
            hidden_states = F.pad(hidden_states, (0, self.hidden_size - og_hidden_states),
                                  mode='constant',
                                  value=0.0)

        if self.shared_experts is None:
            fused_output = torch.ops.vllm.moe_forward(hidden_states, router_logits, self.layer_name)
            return fused_output[..., :og_hidden_states]
        else:
            shared_output, fused_output = torch.ops.vllm.moe_forward_shared(hidden_states, router_logits,
                                                                            self.layer_name)
            return (shared_output[..., :og_hidden_states], fused_output[..., :og_hidden_states])

    def forward_impl(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
    ) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        assert self.quant_method is not None
        shared_output = None

        # Matrix multiply.
        final_hidden_states = self.quant_method.apply(
            layer=self,
            x=hidden_states,
            router_logits=router_logits,
            top_k=self.top_k,
            renormalize=self.renormalize,
            use_grouped_topk=self.use_grouped_topk,
            global_num_experts=self.global_num_experts,
            expert_map=self.expert_map,
            topk_group=self.topk_group,
            num_expert_group=self.num_expert_group,
            custom_routing_function=self.custom_routing_function,
            scoring_func=self.scoring_func,
            routed_scaling_factor=self.routed_scaling_factor,
            e_score_correction_bias=self.e_score_correction_bias,
            activation=self.activation,
            apply_router_weight_on_input=self.apply_router_weight_on_input,
        )

        def reduce_output(states: torch.Tensor, do_combine: bool = True) -> torch.Tensor:
            # real: combine / tensor_model_parallel_all_reduce when tp_size > 1 or ep_size > 1
            return states

        if self.shared_experts is None:
            assert not isinstance(final_hidden_states, tuple)
            return reduce_output(final_hidden_states)
        else:
            return (
                reduce_output(final_hidden_states[0], do_combine=False),
                reduce_output(final_hidden_states[1]),
            )


def moe_forward(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    layer_name: str,
) -> torch.Tensor:
    forward_context: ForwardContext = get_forward_context()
    self = forward_context.no_compile_layers[layer_name]
    assert self.shared_experts is None
    return self.forward_impl(hidden_states, router_logits)


def moe_forward_fake(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    layer_name: str,
) -> torch.Tensor:
    return torch.empty_like(hidden_states)


direct_register_custom_op(
    op_name="moe_forward",
    op_func=moe_forward,
    mutates_args=["hidden_states"],
    fake_impl=moe_forward_fake,
    tags=(torch.Tag.needs_fixed_stride_order, ),
)


# ---------------------------------------------------------------- vllm_gaudi/extension/ops.py (trimmed, CPU kernel stand-in)
hpu_lib = Library("hpu", "FRAGMENT")  # noqa
hpu_lib.define("mixture_of_experts(Tensor hidden_states, Tensor expert_routing_table, Tensor router_weights, "
               "Tensor[] w12, Tensor[] w3, bool permuted_weights, str activation, int experts_min, "
               "int experts_max) -> Tensor")


def _mixture_of_experts_cpu(hidden_states, expert_routing_table, router_weights, w12, w3, permuted_weights,
                            activation, experts_min, experts_max):
    # CPU stand-in for the Gaudi MoE kernel: dense loop over the experts of this rank
    out = torch.zeros_like(hidden_states)
    for e in range(experts_min, experts_max + 1):
        w1, w3_ = w12[e - experts_min].chunk(2, dim=0)
        h = F.silu(hidden_states @ w1.t()) * (hidden_states @ w3_.t())
        h = h @ w3[e - experts_min].t()
        weight = (router_weights * (expert_routing_table == e)).sum(-1, keepdim=True)
        out = out + h * weight
    return out


hpu_lib.impl("mixture_of_experts", _mixture_of_experts_cpu, "CPU")


@torch.library.register_fake("hpu::mixture_of_experts")
def _(hidden_states, expert_routing_table, router_weights, w12, w3, permuted_weights, activation, experts_min,
      experts_max):
    return torch.empty_like(hidden_states)


class MoeMatmul(torch.nn.Module):

    def __init__(self):
        super().__init__()

    def set_weight(self, w):
        self.weight = w

    def forward(self, state, expert_id, w):
        raise NotImplementedError()


class VllmMixtureOfExpertsOp(torch.nn.Module):

    def __init__(self, num_total_experts, experts_min: int = 0, experts_max: int = 8):
        super().__init__()
        self.w13_list = torch.nn.ModuleList([MoeMatmul() for _ in range(num_total_experts)])
        self.w2_list = torch.nn.ModuleList([MoeMatmul() for _ in range(num_total_experts)])
        self.num_experts = num_total_experts
        self.experts_min = experts_min
        self.experts_max = experts_max

    def forward(self, hidden_states, expert_routing_table, router_weights, permuted_weights=True, activation="silu"):
        # pre-processing for custom op inputs
        experts_range = range(self.num_experts)
        w1_list = [self.w13_list[i].weight.squeeze() for i in experts_range]
        w2_list = [self.w2_list[i].weight.squeeze() for i in experts_range]

        return torch.ops.hpu.mixture_of_experts(hidden_states=hidden_states,
                                                expert_routing_table=expert_routing_table,
                                                router_weights=router_weights,
                                                w12=w1_list,
                                                w3=w2_list,
                                                permuted_weights=permuted_weights,
                                                activation=activation,
                                                experts_min=self.experts_min,
                                                experts_max=self.experts_max)


# ---------------------------------------------------------------- vllm_gaudi/ops/hpu_fused_moe.py
@UnquantizedFusedMoEMethod.register_oot
class HPUUnquantizedFusedMoEMethod(UnquantizedFusedMoEMethod):
    """MoE method without quantization."""

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        super().process_weights_after_loading(layer)
        # custom handling for HPU
        num_experts = layer.local_num_experts
        ep_shift = layer.ep_rank * num_experts

        experts_min, experts_max = ep_shift, num_experts + ep_shift - 1
        layer.moe_op = VllmMixtureOfExpertsOp(
            num_experts,
            experts_min,
            experts_max,
        )

        for expert_id in range(layer.local_num_experts):
            layer.moe_op.w13_list[expert_id].set_weight(layer.w13_weight.data[expert_id])
            layer.moe_op.w2_list[expert_id].set_weight(layer.w2_weight.data[expert_id])

    def forward_oot(
        self,
        layer: torch.nn.Module,
        x: torch.Tensor,
        use_grouped_topk: bool,
        top_k: int,
        router_logits: torch.Tensor,
        renormalize: bool,
        topk_group: Optional[int] = None,
        num_expert_group: Optional[int] = None,
        global_num_experts: int = -1,
        expert_map: Optional[torch.Tensor] = None,
        custom_routing_function: Optional[Callable] = None,
        scoring_func: str = "softmax",
        e_score_correction_bias: Optional[torch.Tensor] = None,
        apply_router_weight_on_input: bool = False,
        activation: str = "silu",
        **kwargs,
    ):
        input_shape = x.shape
        x = x.view(-1, x.shape[-1])
        topk_weights = F.softmax(router_logits, dim=1, dtype=torch.float32)
        topk_weights, topk_ids = torch.topk(topk_weights, top_k, dim=-1)
        topk_weights /= topk_weights.sum(dim=-1, keepdim=True)
        topk_weights = topk_weights.to(x.dtype)
        topk_ids = topk_ids.view(*x.shape[:-1], -1)
        topk_weights = topk_weights.view(*x.shape[:-1], -1)

        return layer.moe_op(
            x,
            topk_ids.to(torch.int64),
            topk_weights.to(x.dtype),
            permuted_weights=True,
            activation=activation,
        ).view(*input_shape)


# (vllm-gaudi #158: FusedMoE.forward without the layer-name custom op, since 2025-09)
def patched_fused_moe_forward(
    self,
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
) -> Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """
    Patched forward method that bypasses the custom op to avoid recompilation issues.
    """
    og_hidden_states = hidden_states.shape[-1]
    if self.hidden_size != og_hidden_states:
        hidden_states = torch.nn.functional.pad(hidden_states, (0, self.hidden_size - og_hidden_states),
                                                mode='constant',
                                                value=0.0)

    use_direct_implementation = self.dp_size == 1
    if self.shared_experts is None:
        if use_direct_implementation:
            fused_output = self.forward_impl(hidden_states, router_logits)
            assert not isinstance(fused_output, tuple)
        else:
            fused_output = torch.ops.vllm.moe_forward(hidden_states, router_logits, self.layer_name)
        return fused_output[..., :og_hidden_states]
    else:
        if use_direct_implementation:
            shared_output, fused_output = self.forward_impl(hidden_states, router_logits)
        else:
            shared_output, fused_output = torch.ops.vllm.moe_forward_shared(hidden_states, router_logits,
                                                                            self.layer_name)
        return (shared_output[..., :og_hidden_states], fused_output[..., :og_hidden_states])


# Apply patches
FusedMoE.forward = patched_fused_moe_forward


# ---------------------------------------------------------------- vllm layers used by Qwen3-MoE (trimmed stand-ins)
class RMSNorm(CustomOp):

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.variance_epsilon = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward_native(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        orig_dtype = x.dtype
        x = x.to(torch.float32)
        if residual is not None:
            x = x + residual.to(torch.float32)
            residual = x.to(orig_dtype)
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        x = x.to(orig_dtype) * self.weight
        if residual is None:
            return x
        return x, residual


class VocabParallelEmbedding(nn.Module):

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim))

    def forward(self, input_):
        return F.embedding(input_, self.weight)


class LinearBase(nn.Module):
    """ReplicatedLinear / QKVParallelLinear / RowParallelLinear with tp_size 1: (output, output_bias)."""

    def __init__(self, input_size: int, output_size: int, bias: bool = False, prefix: str = ""):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(output_size, input_size))

    def forward(self, x):
        return F.linear(x, self.weight), None


class RotaryEmbedding(nn.Module):  # get_rope(..., is_neox_style=True)

    def __init__(self, head_size: int, base: float = 10000):
        super().__init__()
        self.head_size = head_size
        self.inv_freq = 1.0 / (base**(torch.arange(0, head_size, 2, dtype=torch.float) / head_size))

    def forward(self, positions, query, key):
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        cos, sin = freqs.cos(), freqs.sin()

        def rot(x):
            x = x.view(x.shape[0], -1, self.head_size)
            x1, x2 = x.chunk(2, dim=-1)
            c, s = cos[:, None, :], sin[:, None, :]
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(1)

        return rot(query), rot(key)


class HPUAttentionImpl:  # stand-in for vllm_gaudi's HPUAttentionImpl (no KV cache, causal SDPA per prompt)

    def __init__(self, num_heads, head_size, scale, num_kv_heads):
        self.num_heads, self.head_size, self.scale, self.num_kv_heads = num_heads, head_size, scale, num_kv_heads

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output=None):
        q = query.view(-1, self.num_heads, self.head_size).transpose(0, 1)
        k = key.view(-1, self.num_kv_heads, self.head_size).transpose(0, 1)
        v = value.view(-1, self.num_kv_heads, self.head_size).transpose(0, 1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale, enable_gqa=True)
        return out.transpose(0, 1).reshape(-1, self.num_heads * self.head_size)


class Attention(nn.Module):  # vllm/attention/layer.py, the `use_direct_call` branch (HPU)

    def __init__(self, num_heads, head_size, scale, num_kv_heads, prefix=""):
        super().__init__()
        self.impl = HPUAttentionImpl(num_heads, head_size, scale, num_kv_heads)
        self.use_direct_call = True  # not current_platform.opaque_attention_op()
        self.layer_name = prefix
        self.kv_cache = [torch.tensor([])]
        compilation_config = get_current_vllm_config().compilation_config
        compilation_config.static_forward_context[prefix] = self

    def forward(self, query, key, value):
        forward_context = get_forward_context()
        attn_metadata = forward_context.attn_metadata
        if isinstance(attn_metadata, dict):
            attn_metadata = attn_metadata[self.layer_name]
        self_kv_cache = self.kv_cache[forward_context.virtual_engine]
        return self.impl.forward(self, query, key, value, self_kv_cache, attn_metadata)


# ---------------------------------------------------------------- vllm/model_executor/models/qwen3_moe.py (trimmed)
class Qwen3MoeConfig:
    vocab_size = 64
    hidden_size = 32
    moe_intermediate_size = 24
    num_attention_heads = 4
    num_key_value_heads = 2
    head_dim = 8
    num_hidden_layers = 3
    num_experts = 4
    num_experts_per_tok = 2
    norm_topk_prob = True
    rms_norm_eps = 1e-6


class Qwen3MoeSparseMoeBlock(nn.Module):

    def __init__(self, config, prefix: str = ""):
        super().__init__()
        self.experts = FusedMoE(num_experts=config.num_experts,
                                top_k=config.num_experts_per_tok,
                                hidden_size=config.hidden_size,
                                intermediate_size=config.moe_intermediate_size,
                                reduce_results=True,
                                renormalize=config.norm_topk_prob,
                                prefix=f"{prefix}.experts")
        self.gate = LinearBase(config.hidden_size, config.num_experts, bias=False, prefix=f"{prefix}.gate")

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        assert hidden_states.dim() <= 2, "Qwen3MoeSparseMoeBlock only supports 1D or 2D inputs"
        is_input_1d = hidden_states.dim() == 1
        hidden_dim = hidden_states.shape[-1]
        hidden_states = hidden_states.view(-1, hidden_dim)

        # router_logits: (num_tokens, n_experts)
        router_logits, _ = self.gate(hidden_states)
        final_hidden_states = self.experts(hidden_states=hidden_states, router_logits=router_logits)

        # return to 1d if input is 1d
        return final_hidden_states.squeeze(0) if is_input_1d else \
            final_hidden_states


class Qwen3MoeAttention(nn.Module):

    def __init__(self, hidden_size: int, num_heads: int, num_kv_heads: int, head_dim: int, rms_norm_eps: float,
                 prefix: str = ""):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scaling = self.head_dim**-0.5
        self.qkv_proj = LinearBase(hidden_size, self.q_size + 2 * self.kv_size, prefix=f"{prefix}.qkv_proj")
        self.o_proj = LinearBase(self.q_size, hidden_size, prefix=f"{prefix}.o_proj")
        self.rotary_emb = RotaryEmbedding(self.head_dim)
        self.attn = Attention(self.num_heads, self.head_dim, self.scaling, num_kv_heads=self.num_kv_heads,
                              prefix=f"{prefix}.attn")
        self.q_norm = RMSNorm(self.head_dim, eps=rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, eps=rms_norm_eps)

    def forward(
        self,
        positions: torch.Tensor,
        hidden_states: torch.Tensor,
    ) -> torch.Tensor:
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        # Add qk-norm
        q_by_head = q.view(*q.shape[:-1], q.shape[-1] // self.head_dim, self.head_dim)
        q_by_head = self.q_norm(q_by_head)
        q = q_by_head.view(q.shape)

        k_by_head = k.view(*k.shape[:-1], k.shape[-1] // self.head_dim, self.head_dim)
        k_by_head = self.k_norm(k_by_head)
        k = k_by_head.view(k.shape)
        q, k = self.rotary_emb(positions, q, k)
        attn_output = self.attn(q, k, v)
        output, _ = self.o_proj(attn_output)
        return output


class Qwen3MoeDecoderLayer(nn.Module):

    def __init__(self, config, prefix: str = "") -> None:
        super().__init__()
        self.hidden_size = config.hidden_size
        self.self_attn = Qwen3MoeAttention(hidden_size=self.hidden_size,
                                           num_heads=config.num_attention_heads,
                                           num_kv_heads=config.num_key_value_heads,
                                           head_dim=config.head_dim,
                                           rms_norm_eps=config.rms_norm_eps,
                                           prefix=f"{prefix}.self_attn")
        self.mlp = Qwen3MoeSparseMoeBlock(config=config, prefix=f"{prefix}.mlp")
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(
        self,
        positions: torch.Tensor,
        hidden_states: torch.Tensor,
        residual: Optional[torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # Self Attention
        if residual is None:
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
        else:
            hidden_states, residual = self.input_layernorm(hidden_states, residual)
        hidden_states = self.self_attn(
            positions=positions,
            hidden_states=hidden_states,
        )

        # Fully Connected
        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual


class Qwen3MoeModel(nn.Module):

    def __init__(self, config, prefix: str = "model"):
        super().__init__()
        self.config = config
        self.embed_tokens = VocabParallelEmbedding(config.vocab_size, config.hidden_size)
        self.start_layer, self.end_layer = 0, config.num_hidden_layers
        self.layers = nn.ModuleList(
            Qwen3MoeDecoderLayer(config, prefix=f"{prefix}.layers.{i}") for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.aux_hidden_state_layers = tuple[int, ...]()

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)

    def forward(
        self,
        input_ids: Optional[torch.Tensor],
        positions: torch.Tensor,
        intermediate_tensors=None,
        inputs_embeds: Optional[torch.Tensor] = None,
    ):
        # (pipeline parallelism: first and last rank)
        hidden_states = inputs_embeds if inputs_embeds is not None else self.embed_input_ids(input_ids)
        residual = None

        aux_hidden_states = []
        for layer_idx, layer in enumerate(
                self.layers[self.start_layer:self.end_layer],
                start=self.start_layer,
        ):
            if layer_idx in self.aux_hidden_state_layers:
                aux_hidden_state = hidden_states + residual if residual is not None else hidden_states
                aux_hidden_states.append(aux_hidden_state)
            hidden_states, residual = layer(positions, hidden_states, residual)

        hidden_states, _ = self.norm(hidden_states, residual)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states


class Qwen3MoeForCausalLM(nn.Module):

    def __init__(self, config, prefix: str = ""):
        super().__init__()
        self.config = config
        self.model = Qwen3MoeModel(config, prefix="model")

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden_states = self.model(input_ids, positions)
        return hidden_states


# ---------------------------------------------------------------- vllm_gaudi/models/qwen3_moe.py (added by the fix)
class HpuQwen3MoeModel(Qwen3MoeModel):
    """Initialize residual as zeros instead of None to eliminate Dynamo type guard."""

    def forward(
        self,
        input_ids: Optional[torch.Tensor],
        positions: torch.Tensor,
        intermediate_tensors=None,
        inputs_embeds: Optional[torch.Tensor] = None,
    ):
        # (pipeline parallelism: first and last rank)
        hidden_states = inputs_embeds if inputs_embeds is not None else self.embed_input_ids(input_ids)
        residual = torch.zeros_like(hidden_states)

        aux_hidden_states = []
        for layer_idx, layer in enumerate(
                self.layers[self.start_layer:self.end_layer],
                start=self.start_layer,
        ):
            if layer_idx in self.aux_hidden_state_layers:
                aux_hidden_state = hidden_states + residual
                aux_hidden_states.append(aux_hidden_state)
            hidden_states, residual = layer(positions, hidden_states, residual)

        hidden_states, _ = self.norm(hidden_states, residual)

        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states


class HpuQwen3MoeForCausalLM(Qwen3MoeForCausalLM):

    def __init__(self, config, prefix: str = ""):
        super().__init__(config, prefix=prefix)
        if hasattr(self, "model") and isinstance(self.model, Qwen3MoeModel):
            self.model.__class__ = HpuQwen3MoeModel


# ---------------------------------------------------------------- vllm_gaudi/utils.py + v1/worker/hpu_model_runner.py (trimmed)
class HPUCompileConfig:
    """
    Configuration class, which holds arguments that will be
    passed to torch compile with HPU backend.
    """

    def __init__(self, fullgraph: Optional[bool] = None, dynamic: Optional[bool] = None):
        self.fullgraph = fullgraph if fullgraph is not None else False  # VLLM_T_COMPILE_FULLGRAPH
        self.dynamic = dynamic if dynamic is not None else True  # VLLM_T_COMPILE_DYNAMIC_SHAPES
        self.regional_compilation = True  # VLLM_T_COMPILE_REGIONAL_COMPILATION

    def get_compile_args(self) -> dict[str, Any]:
        if self.dynamic:
            # real: {'backend': 'hpu_backend', 'fullgraph': ..., 'options': {"force_static_compile": True}}
            return {'backend': counting_backend, 'fullgraph': self.fullgraph}
        else:
            return {'backend': counting_backend, 'fullgraph': self.fullgraph, 'dynamic': False}


class HPUModelRunner:

    def __init__(self, model):
        self.model = model

    def _maybe_compile(self, *args, **kwargs):
        """Entrypoint for a torch.compilation of the model"""
        # force_parameter_static_shapes = False  alows to use dynamic
        # shapes on tensors added to module via register_buffer()
        torch._dynamo.config.force_parameter_static_shapes = False
        self.compile_config = HPUCompileConfig()
        if self.compile_config.regional_compilation:
            self.regional_compilation_layers_list = [RMSNorm, VocabParallelEmbedding]
            self._regional_compilation(self.model)
        else:
            self.model = self._compile(self.model)

    def _regional_compilation(self, module, parent_module=None, module_name=None):
        if isinstance(module, torch.nn.ModuleList):
            for children_name, children_module in module.named_children():
                self._compile_region(module, children_name, children_module)
        elif any(isinstance(module, layer) for layer in self.regional_compilation_layers_list):
            self._compile_region(
                parent_module,
                module_name,
                module,
            )
        else:
            for children_name, children_module in module.named_children():
                self._regional_compilation(children_module, module, children_name)

    def _compile_region(self, model, name, module):
        module = self._compile(module)
        setattr(model, name, module)

    def _compile(self, module):
        return torch.compile(module, **self.compile_config.get_compile_args())

    @torch.inference_mode()
    def execute_model(self, input_ids, positions):
        with set_forward_context(None, get_current_vllm_config()):
            return self.model(input_ids, positions)


def main():
    torch.manual_seed(0)
    config = Qwen3MoeConfig()
    # ModelRegistry.register_model("Qwen3MoeForCausalLM", "vllm_gaudi.models.qwen3_moe:HpuQwen3MoeForCausalLM")
    model = HpuQwen3MoeForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    for module in model.modules():  # load_weights -> process_weights_after_loading
        if isinstance(module, FusedMoE):
            module.quant_method.process_weights_after_loading(module)
    runner = HPUModelRunner(model)
    runner._maybe_compile()
    total = 0.0
    # prompt buckets of 16 and 32 tokens, two requests each
    for seq_len in (16, 16, 32, 32):
        input_ids = torch.randint(0, config.vocab_size, (seq_len, ))
        positions = torch.arange(seq_len)
        out = runner.execute_model(input_ids, positions)
        total += float(out.float().abs().sum())
    return total


total = main()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {total:.4f}")
