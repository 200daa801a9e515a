# realworld: positive fix=safe graphs=2
# Pattern: pytorch-labs/gpt-fast (generate.py at
# 32971d3129541c5bfb4f715abc33d1c5f408d204: `decode_one_token(model, x,
# input_pos, **sampling_kwargs)` is compiled, and `generate(...,
# **sampling_kwargs)` forwards `temperature` through `decode_n_tokens`; the
# trace reason reads `sampling_kwargs['temperature'] == 0.7`): a float
# forwarded through `**kwargs` into a compiled function.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 5 x 2 decode steps; hand-fixed
# (`temperature=torch.tensor(temperature, dtype=torch.float64)` at the call):
# 1, same output.
import torch


def logits_to_probs(logits, temperature=1.0, top_k=None):
    logits = logits / temperature
    if top_k is not None:
        v, _ = torch.topk(logits, top_k)
        logits = torch.where(logits < v[..., -1:], torch.full_like(logits, -1e9), logits)
    return torch.softmax(logits, dim=-1)


def decode_one_token(weight, x, **sampling_kwargs):
    logits = x @ weight
    probs = logits_to_probs(logits, **sampling_kwargs)
    return probs.max(dim=-1).values


decode_one_token = torch.compile(decode_one_token, backend="eager")


def decode_n_tokens(weight, x, n, **sampling_kwargs):
    toks = []
    for _ in range(n):
        toks.append(decode_one_token(weight, x, **sampling_kwargs))
    return torch.stack(toks)


def generate(weight, x, n=2, **sampling_kwargs):
    return decode_n_tokens(weight, x, n, **sampling_kwargs)


torch.manual_seed(0)
weight = torch.randn(8, 16)
x = torch.randn(1, 8)
for temperature in (0.8, 0.7, 1.0, 0.6, 0.9):
    print([[round(v, 4) for v in row] for row in generate(weight, x, temperature=temperature, top_k=4).tolist()])  # expect: FR003
