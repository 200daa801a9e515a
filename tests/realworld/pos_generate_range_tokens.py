# realworld: positive fix=none graphs=8 limit
# Pattern: a compiled decode loop whose length is an argument, as in
# karpathy/nanoGPT model.py `generate(idx, max_new_tokens, ...)` (`for _ in
# range(max_new_tokens)`), here compiled and called with a different length
# per prompt. Dynamo unrolls the loop: the length is specialised, each value
# a new graph, even with dynamic=True.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 lengths). No automatic cure (bucket the
# lengths, or compile the one-token step and loop outside).
import torch
import torch.nn as nn

torch.manual_seed(0)
head = nn.Linear(8, 8)


@torch.compile
def generate(h, max_new_tokens):
    outs = []
    for _ in range(max_new_tokens):
        h = torch.tanh(head(h))
        outs.append(h)
    return torch.stack(outs)


h0 = torch.randn(1, 8)
with torch.no_grad():
    for n_tokens in range(1, 13):
        y = generate(h0, n_tokens)  # expect: FR009
        print(n_tokens, round(float(y.sum()), 4))
