"""Floats that reach a compiled function through **kwargs and *args keys."""
import torch


def generate(logits, **sampling_kwargs):
    return torch.softmax(logits / sampling_kwargs["temperature"], dim=-1)


def blend(*args):
    return args[0] * args[1]


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
gen = torch.compile(generate, backend="eager")
mix = torch.compile(blend, backend="eager")

logits = torch.linspace(-1.0, 1.0, 8)
total = 0.0
for t in (0.7, 0.8, 0.9, 1.0):
    total += float(gen(logits, temperature=t).max())
    total += float(mix(logits, t).sum())
print("result:", round(total, 4))
