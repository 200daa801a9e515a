# realworld: negative graphs=1
# Pattern: hyperparameters read once from a config/argparse namespace
# (pytorch-labs/gpt-fast generate.py at
# 32971d3129541c5bfb4f715abc33d1c5f408d204: `parser.add_argument(
# '--temperature', type=float, default=0.8)` then passed unchanged to every
# call; torchtune recipes read `cfg.loss_scale` once): the float never changes
# between calls of the compiled function, so it does not recompile.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 10 calls (the floats never change).
import argparse

import torch
import torch.nn.functional as F


@torch.compile(backend="eager")
def sample(logits, temperature, dropout_p):
    logits = F.dropout(logits, p=dropout_p, training=False)
    return torch.argmax(torch.softmax(logits / temperature, dim=-1), dim=-1)


parser = argparse.ArgumentParser()
parser.add_argument("--temperature", type=float, default=0.8)
parser.add_argument("--dropout", type=float, default=0.1)
args = parser.parse_args([])

torch.manual_seed(0)
weight = torch.randn(8, 16)
x = torch.randn(1, 8)
toks = []
for _ in range(10):
    tok = sample(x @ weight, args.temperature, args.dropout)
    toks.append(int(tok))
    x = torch.tanh(x + 0.1)
print(toks)
