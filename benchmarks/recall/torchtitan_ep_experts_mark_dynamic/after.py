# Reproduction of pytorch/torchtitan BEFORE 8d020ccb7 (#2007 "Mark input tokens to routed experts as
# dynamic to avoid a recompile"): apply_compile (models/llama4/infra/parallelize.py) rebinds the
# module-level function moe._run_experts_grouped_mm to a compiled version; under expert parallelism
# each rank receives a different number of routed tokens every step, so x.shape[0] changes.
# One file stands for two modules: `moe_module` is this module (sys.modules[__name__]).
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

FIXED = True  # the fix: mark_dynamic(x, 0) wrapper around the compiled function under EP
EP_ENABLED = True  # parallel_dims.ep_enabled (the EP branch of GroupedExperts.forward is taken)

GRAPHS = 0


def counting_backend(gm, example_inputs):  # compile_config.backend ("inductor")
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---------------- torchtitan/models/moe/moe.py ----------------
def _run_experts_grouped_mm(w1, w2, w3, x, num_tokens_per_expert):
    offsets = torch.cumsum(num_tokens_per_expert, dim=0, dtype=torch.int32)
    h = F.silu(torch._grouped_mm(x.bfloat16(), w1.bfloat16().transpose(-2, -1), offs=offsets))
    h = h * torch._grouped_mm(x.bfloat16(), w3.bfloat16().transpose(-2, -1), offs=offsets)
    out = torch._grouped_mm(h, w2.bfloat16().transpose(-2, -1), offs=offsets).type_as(x)
    return out


class GroupedExperts(nn.Module):
    def __init__(self, dim, hidden_dim, num_experts, use_grouped_mm):
        super().__init__()
        self.num_experts = num_experts
        self.w1 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, hidden_dim))
        self.w3 = nn.Parameter(torch.empty(num_experts, hidden_dim, dim))
        self.use_grouped_mm = use_grouped_mm

    def forward(self, x, num_tokens_per_expert):
        w1, w2, w3 = self.w1, self.w2, self.w3  # DTensor.to_local() under EP
        if self.use_grouped_mm:
            # EP path: tokens already padded per expert by the dispatcher
            run_experts_fn = _run_experts_grouped_mm
            return run_experts_fn(w1, w2, w3, x, num_tokens_per_expert)
        raise NotImplementedError

    def init_weights(self, init_std: float):
        nn.init.trunc_normal_(self.w1, mean=0.0, std=0.02)
        nn.init.trunc_normal_(self.w2, mean=0.0, std=init_std)
        nn.init.trunc_normal_(self.w3, mean=0.0, std=init_std)


# ---------------- torchtitan/models/llama4/infra/parallelize.py ----------------
moe_module = sys.modules[__name__]


def apply_compile(model, backend, ep_enabled):
    torch._dynamo.config.capture_scalar_outputs = True
    # Workaround for https://github.com/pytorch/pytorch/issues/166926
    torch._C._dynamo.eval_frame._set_lru_cache(False)
    # (per-TransformerBlock / per-submodule compiles of the real function omitted: no block here)
    moe_module._run_experts_grouped_mm = torch.compile(
        moe_module._run_experts_grouped_mm, backend=backend, fullgraph=True)
    if FIXED and ep_enabled:
        compiled_fn = moe_module._run_experts_grouped_mm

        def _run_experts_grouped_mm_dynamic(w1, w2, w3, x, num_tokens_per_expert):
            # dynamic number of tokens in expert parallel
            torch._dynamo.mark_dynamic(x, 0)
            return compiled_fn(w1, w2, w3, x, num_tokens_per_expert)

        moe_module._run_experts_grouped_mm = _run_experts_grouped_mm_dynamic


torch.manual_seed(0)
experts = GroupedExperts(dim=16, hidden_dim=32, num_experts=4, use_grouped_mm=True)
experts.init_weights(0.02)
apply_compile(experts, counting_backend, EP_ENABLED)
out = 0.0
with torch.no_grad():
    # tokens received by this rank per local expert, one row per training step (padded to multiples of 8)
    for counts in [[8, 16, 8, 8], [16, 16, 8, 24], [8, 8, 8, 8], [24, 8, 16, 16], [8, 32, 8, 16]]:
        num_tokens_per_expert = torch.tensor(counts, dtype=torch.int32)
        x = torch.randn(sum(counts), 16)
        out += experts(x, num_tokens_per_expert).float().sum().item()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
