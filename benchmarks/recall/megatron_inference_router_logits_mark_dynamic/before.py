"""Megatron-LM 911de70c33^ (PR #3925 branch): InferenceTopKRouter._forward passes the
router logits of each CUDA-graphed decode step to the `@torch.compile`d static method
`_compiled_topk_routing` (megatron/core/transformer/moe/router.py); the number of tokens
differs per CUDA-graph batch-size bucket.

Trimmed CPU reproduction: the GPU placement in `gating` and the fused TE path are dropped,
`router_gating_linear` (a custom autograd Function) is a plain linear in the router dtype,
and the dynamic inference engine is a loop over CUDA-graph batch sizes.
"""
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# --- megatron/core/transformer/transformer_config.py (the fields used here) ----------
@dataclass
class TransformerConfig:
    hidden_size: int = 16
    num_moe_experts: int = 8
    moe_router_topk: int = 2
    moe_router_score_function: str = "softmax"
    moe_router_pre_softmax: bool = False
    moe_router_num_groups: Optional[int] = None
    moe_router_group_topk: Optional[int] = None
    moe_router_topk_scaling_factor: Optional[float] = None
    moe_router_enable_expert_bias: bool = False
    moe_router_fusion: bool = False
    moe_router_dtype: Optional[str] = "fp32"
    moe_enable_routing_replay: bool = False
    add_bias_linear: bool = False
    params_dtype: torch.dtype = torch.float32


# --- megatron/core/transformer/moe/moe_utils.py (trimmed) -----------------------------
def router_gating_linear(inp, weight, bias, router_dtype):
    # RouterGatingLinearFunction.apply: linear computed in router_dtype
    return torch.nn.functional.linear(
        inp.to(router_dtype), weight.to(router_dtype), None if bias is None else bias.to(router_dtype)
    )


def topk_routing_with_score_function(
    logits: torch.Tensor,
    topk: int,
    use_pre_softmax: bool = False,
    num_groups: Optional[int] = None,
    group_topk: Optional[int] = None,
    scaling_factor: Optional[float] = None,
    score_function: str = "softmax",
    expert_bias: Optional[torch.Tensor] = None,
    fused: bool = False,
    router_replay=None,
    dense_output: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor]:
    assert logits.dim() == 2, f"Expected 2D logits [num_tokens, num_experts], got {logits.dim()}."
    num_tokens, num_experts = logits.shape

    def _compute_topk(scores, topk, num_groups=None, group_topk=None):
        return torch.topk(scores, k=topk, dim=1)

    def compute_topk(scores, topk, num_groups=None, group_topk=None):
        if router_replay is None:
            return _compute_topk(scores, topk, num_groups=num_groups, group_topk=group_topk)
        return router_replay.get_replay_topk(scores, topk, num_groups, group_topk, _compute_topk)

    if score_function == "softmax":
        if use_pre_softmax:
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32).type_as(logits)
            probs, top_indices = compute_topk(scores, topk, num_groups, group_topk)
        else:
            scores, top_indices = compute_topk(logits, topk, num_groups, group_topk)
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    elif score_function == "sigmoid":
        scores = torch.sigmoid(logits.float()).type_as(logits)
        if expert_bias is not None:
            scores_for_routing = scores + expert_bias
            _, top_indices = compute_topk(scores_for_routing, topk, num_groups, group_topk)
            scores = torch.gather(scores, dim=1, index=top_indices).type_as(logits)
        else:
            scores, top_indices = compute_topk(scores, topk, num_groups, group_topk)
        probs = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20) if topk > 1 else scores
    else:
        raise ValueError(f"Invalid score_function: {score_function}")

    if scaling_factor:
        probs = probs * scaling_factor

    if dense_output:
        return probs, top_indices
    routing_probs = torch.zeros_like(logits).scatter(1, top_indices, probs)
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    return routing_probs, routing_map


# --- megatron/core/transformer/moe/router.py (trimmed) --------------------------------
class Router(torch.nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.num_experts = self.config.num_moe_experts
        self.weight = torch.nn.Parameter(
            torch.empty((self.config.num_moe_experts, self.config.hidden_size), dtype=torch.float32)
        )
        self.bias = None
        self.reset_parameters()

    def reset_parameters(self):
        torch.nn.init.normal_(self.weight, std=0.5)
        self.weight.data = self.weight.data.to(dtype=self.config.params_dtype)

    def gating(self, input: torch.Tensor):
        router_dtype = input.dtype
        if self.config.moe_router_dtype == 'fp32':
            router_dtype = torch.float32
        elif self.config.moe_router_dtype == 'fp64':
            router_dtype = torch.float64
        logits = router_gating_linear(input, self.weight, self.bias, router_dtype)
        return logits


class TopKRouter(Router):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config=config)
        self.topk = self.config.moe_router_topk
        self.score_function = self.config.moe_router_score_function
        self.enable_expert_bias = self.config.moe_router_enable_expert_bias
        self.expert_bias = None
        self.router_replay = None

    def routing(self, logits: torch.Tensor):
        logits = logits.view(-1, self.config.num_moe_experts)
        return topk_routing_with_score_function(
            logits,
            self.topk,
            use_pre_softmax=self.config.moe_router_pre_softmax,
            num_groups=self.config.moe_router_num_groups,
            group_topk=self.config.moe_router_group_topk,
            scaling_factor=self.config.moe_router_topk_scaling_factor,
            score_function=self.score_function,
            expert_bias=self.expert_bias,
            fused=self.config.moe_router_fusion,
            router_replay=self.router_replay,
        )

    def forward(self, input: torch.Tensor, padding_mask: Optional[torch.Tensor] = None):
        logits = self.gating(input)
        return self.routing(logits)


class InferenceTopKRouter(TopKRouter):
    """Inference-only top-k router; _forward() is @torch.compile()'d and returns dense
    [num_tokens, topk] tensors."""

    def __init__(self, config: TransformerConfig) -> None:
        assert config.moe_router_num_groups is None
        assert config.moe_router_score_function in ["sigmoid", "softmax"]
        super().__init__(config=config)
        self.is_inference_cuda_graphed_iteration = False

    def set_inference_cuda_graphed_iteration(self):
        self.is_inference_cuda_graphed_iteration = True

    def unset_inference_cuda_graphed_iteration(self):
        self.is_inference_cuda_graphed_iteration = False

    @staticmethod
    @torch.compile(backend=counting_backend)
    def _compiled_topk_routing(
        logits,
        topk,
        use_pre_softmax,
        num_groups,
        group_topk,
        scaling_factor,
        score_function,
        expert_bias,
        fused,
        router_replay,
        dense_output,
    ):
        return topk_routing_with_score_function(
            logits,
            topk,
            use_pre_softmax=use_pre_softmax,
            num_groups=num_groups,
            group_topk=group_topk,
            scaling_factor=scaling_factor,
            score_function=score_function,
            expert_bias=expert_bias,
            fused=fused,
            router_replay=router_replay,
            dense_output=dense_output,
        )

    def _forward(self, input: torch.Tensor, padding_mask: Optional[torch.Tensor] = None):
        logits = self.gating(input).squeeze(1)  # [num_tokens, num_experts]

        probs, top_indices = self._compiled_topk_routing(
            logits,
            self.topk,
            use_pre_softmax=self.config.moe_router_pre_softmax,
            num_groups=self.config.moe_router_num_groups,
            group_topk=self.config.moe_router_group_topk,
            scaling_factor=self.config.moe_router_topk_scaling_factor,
            score_function=self.score_function,
            expert_bias=self.expert_bias,
            fused=self.config.moe_router_fusion,
            router_replay=self.router_replay,
            dense_output=True,
        )
        return probs.squeeze(1), top_indices.squeeze(1)

    def forward(self, input: torch.Tensor, padding_mask: Optional[torch.Tensor] = None):
        if self.training or not self.is_inference_cuda_graphed_iteration:
            return super().forward(input, padding_mask)
        return self._forward(input, padding_mask)


# --- a tiny MoE stack and the dynamic engine's CUDA-graphed decode steps ---------------
class MoELayer(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.router = InferenceTopKRouter(config)
        self.experts = torch.nn.Parameter(torch.randn(config.num_moe_experts, config.hidden_size) * 0.1)

    def set_inference_cuda_graphed_iteration(self):
        self.router.set_inference_cuda_graphed_iteration()

    def forward(self, hidden_states):  # [num_tokens, 1, hidden]
        probs, top_indices = self.router(hidden_states)
        expert_out = (probs.unsqueeze(-1) * self.experts[top_indices]).sum(1)
        return hidden_states + expert_out.unsqueeze(1)


def set_inference_cuda_graphed_iteration_for_ep_inference(model):  # inference/utils.py
    for layer in model:
        layer.set_inference_cuda_graphed_iteration()


torch.manual_seed(0)
config = TransformerConfig()
model = torch.nn.Sequential(MoELayer(config), MoELayer(config)).eval()
set_inference_cuda_graphed_iteration_for_ep_inference(model)

out = 0.0
with torch.no_grad():
    # CUDA-graph warmup over the decode batch-size buckets, then decode steps padded to a bucket
    for num_tokens in [32, 16, 8, 4, 8, 16, 32, 4]:
        hidden = torch.randn(num_tokens, 1, config.hidden_size)
        out += model(hidden).sum().item()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
