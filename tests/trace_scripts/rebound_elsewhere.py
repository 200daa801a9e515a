"""A module-level function compiled by another module's setup code, which
rebinds the module attribute (torchtitan's apply_compile before #2007:
``moe._run_experts_grouped_mm = torch.compile(moe._run_experts_grouped_mm)``),
and called through a local alias in an eager forward: each step routes
another number of tokens, so dim 0 of ``x`` changes once (2 graphs, then
automatic dynamic).  The compile-site model sees no compile of the function
here; the trace proves it compiled."""
import sys

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


def _run_experts(w1, x, counts):
    offsets = torch.cumsum(counts, dim=0)
    return torch.nn.functional.silu(x @ w1) * offsets[-1]


class Experts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x, counts):
        run_experts_fn = _run_experts
        return run_experts_fn(self.w1, x, counts)


def apply_compile(module):  # stands for the other module's setup code
    module._run_experts = torch.compile(module._run_experts, backend=counting_backend)


apply_compile(sys.modules[__name__])
torch.manual_seed(0)
experts = Experts()
total = 0.0
with torch.no_grad():
    for counts in ([8, 16], [16, 16], [8, 8], [24, 8]):
        x = torch.randn(sum(counts), 8)
        total += float(experts(x, torch.tensor(counts)).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 3))
