# realworld: positive fix=none graphs=8 limit
# Pattern: dropout schedules (annealed/"early dropout", e.g. the `drop_rate`
# schedules of huggingface/pytorch-image-models and models that pass
# `p=self.dropout` computed per step to `F.dropout`): a float that ends in a
# torch API needing a Python number. Wrapping it in a tensor cannot help (the
# op specialises on the value), so the tool must report it and offer no fix,
# safe or unsafe.
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
