# realworld: positive fix=safe graphs=2
# Pattern: pytorch-labs/gpt-fast (generate.py at
# 32971d3129541c5bfb4f715abc33d1c5f408d204, `main()` rebinds
# `decode_one_token = torch.compile(decode_one_token, ...)`) and its
# derivatives where a loader returns the compiled step (`load_model()` returns
# `torch.compile(decode_one_token)`), which is then passed on as an argument
# and called with the temperature.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 6 x 2 calls; hand-fixed (temperature as a float64 0-d tensor):
# 1, same output.
import torch


def decode_one_token(weight, x, temperature):
    logits = (x @ weight) / temperature
    return torch.softmax(logits, dim=-1).max(dim=-1).values


def load_decoder(compile=True):
    step = decode_one_token
    if compile:
        step = torch.compile(step, backend="eager")
    return step


def run(step_fn, weight, x, temperature, n=2):
    return [round(step_fn(weight, x, temperature).item(), 4) for _ in range(n)]  # expect: FR003 [temperature]


torch.manual_seed(0)
weight = torch.randn(8, 16)
x = torch.randn(1, 8)
decode = load_decoder()
for i in range(6):
    print(run(decode, weight, x, 0.5 + i / 10))  # expect: FR003 [temperature]
