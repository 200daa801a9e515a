"""Floats the source cannot show are floats: sampling settings read from
data (JSON), reaching compiled functions as a keyword through **kwargs (and a
forwarding function), through *args, and as a plain parameter."""
import json

import torch


def generate(logits, **sampling_kwargs):
    return torch.softmax(logits / sampling_kwargs["temperature"], dim=-1)


def blend(*args):
    return args[0] * args[1]


def scale(x, factor):
    return x * factor


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
gen = torch.compile(generate, backend="eager")
mix = torch.compile(blend, backend="eager")
sc = torch.compile(scale, backend="eager")


def sample(logits, **kw):
    return gen(logits, **kw)


settings = json.loads('[{"temperature": 0.7, "w": 0.5}, {"temperature": 0.8, "w": 0.25}, {"temperature": 0.9, "w": 0.125}, {"temperature": 1.1, "w": 2.5}]')
logits = torch.linspace(-1.0, 1.0, 8)
total = 0.0
for s in settings:
    total += float(sample(logits, temperature=s["temperature"]).max())
    total += float(mix(logits, s["w"]).sum())
    total += float(sc(logits, s["w"]).sum())
print("result:", round(total, 4))
