"""Floats the source shows, passed in through forwarding functions: the
finding sits where the float is passed in, not on the compiled call."""
import torch


def logits_to_probs(logits, temperature=1.0):
    return torch.softmax(logits / temperature, dim=-1)


def decode_one(weight, x, **sampling_kwargs):
    return logits_to_probs(x @ weight, **sampling_kwargs)


def ema_update(ema, param, decay):
    ema.mul_(decay).add_(param, alpha=1.0)
    ema.sub_(param * decay)
    return ema


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
decode = torch.compile(decode_one, backend="eager")
ema_step = torch.compile(ema_update, backend="eager")


def generate(weight, x, **kw):
    return decode(weight, x, **kw)


def run_update(fn, *args):
    return fn(*args)


weight = torch.linspace(-1.0, 1.0, 32).reshape(4, 8)
x = torch.linspace(0.0, 1.0, 4).reshape(1, 4)
ema = torch.zeros(8)
param = torch.linspace(-2.0, 2.0, 8)
total = 0.0
for step, temperature in enumerate((0.8, 0.7, 1.0, 0.6)):
    total += float(generate(weight, x, temperature=temperature).max())
    decay = min(0.999, (1 + step) / (10 + step))
    run_update(ema_step, ema, param, decay)
print("result:", round(total + float(ema.sum()), 4))
