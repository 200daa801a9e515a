# realworld: positive fix=none graphs=8 limit
# Pattern: issue 12, form 10 (not in the seven pinned repos): a dropout
# probability annealed during training ("early dropout"-style schedules) passed
# to a compiled function that ends in `F.dropout(x, p=p)`. The op needs a
# Python number, so wrapping it in a tensor cannot help (see the measurement:
# dropout leaves the graph); the tool must report it and offer no fix, safe or
# unsafe.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (every p recompiles; the rest runs eager).
# Hand-wrapped `torch.tensor(p)`: 1 graph, because dynamo cannot trace
# `F.dropout` with a tensor p and runs it outside the graph -- no cure, hence
# no fix.
import torch
import torch.nn.functional as F


@torch.compile(backend="eager")
def mlp(x, w, p):
    h = torch.relu(x @ w)
    return F.dropout(h, p=p, training=True)


torch.manual_seed(0)
w = torch.randn(8, 8)
x = torch.randn(4, 8)
shapes = []
for step in range(12):
    p = 0.5 * (1 - step / 12)
    y = mlp(x, w, p)  # expect: FR003
    shapes.append(tuple(y.shape))
print(shapes[0], len(shapes))
