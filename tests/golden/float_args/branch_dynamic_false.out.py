# golden: runtime --unsafe-fixes
# The compiled function's helper branches on the float. Under dynamic=False
# every value recompiles (the recompile limit is hit); with a 0-d tensor the
# `if` is a graph break and the function compiles a few graphs for every
# value: the wrap cures it at the cost of a graph break, so it is unsafe
# (applied with --unsafe-fixes). Without dynamic=False on torch 2.6+, or under
# fullgraph=True, no fix is offered (tests/test_float_args.py).
import torch


def sharpen(logits, temperature):
    if temperature > 0.0:
        return torch.softmax(logits / temperature, dim=-1)
    return torch.softmax(logits, dim=-1)


@torch.compile(dynamic=False)
def probs(logits, temperature):
    return sharpen(logits, temperature).max(dim=-1).values


torch.manual_seed(0)
logits = torch.randn(2, 5)
for step in range(12):
    temperature = 1.0 - step / 10
    print(step, [round(v, 5) for v in probs(logits, torch.tensor(temperature, dtype=torch.float64)).tolist()])
