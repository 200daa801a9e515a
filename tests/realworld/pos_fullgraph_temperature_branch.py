# realworld: positive fix=none graphs=2
# Pattern: Lightning-AI/litgpt (litgpt/generate/base.py at
# 26857050fe3ff627cd714fe92f5838f51a3d5efa: `sample(logits, temperature=1.0,
# ...)` branches on `if temperature > 0.0` (greedy otherwise), and `next_token`
# is compiled) and pytorch-labs/gpt-fast (decode_one_token compiled with
# `fullgraph=True`): the temperature varies between calls and is used as a
# Python number in an `if`. Wrapped in a tensor, the `if` becomes a
# data-dependent branch that `fullgraph=True` refuses: issue 12 saw the
# offered unsafe wrap crash the program. Report, offer no fix.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 5 calls (the float becomes dynamic; the `if` only guards its
# sign); hand-wrapped `torch.tensor(temperature, dtype=torch.float64)`:
# crashes with `Unsupported: Data-dependent branching` under fullgraph=True.
import torch


def sample(logits, temperature=1.0):
    if temperature > 0.0:
        return torch.softmax(logits / temperature, dim=-1).max(dim=-1).values
    return torch.softmax(logits, dim=-1).max(dim=-1).values


@torch.compile(fullgraph=True, backend="eager")
def next_token(weight, x, temperature):
    return sample(x @ weight, temperature)


torch.manual_seed(0)
weight = torch.randn(8, 16)
x = torch.randn(1, 8)
for temperature in (0.8, 0.7, 1.0, 0.6, 0.9):
    print(round(next_token(weight, x, temperature).item(), 4))  # expect: FR003
