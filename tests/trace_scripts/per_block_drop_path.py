# Regional compilation of blocks that each hold their own float (timm-style
# stochastic depth: DropPath(drop_prob=dpr[i]) with rates from a linspace):
# the rate reaches bernoulli_(keep_prob), which needs a Python number, so
# torch guards a value computed from it, and every block's own rate is a new
# graph of the one shared Block.forward: 8 graphs, then the recompile limit.
# Measured on torch 2.13: whole-model compile, 1 graph; in eval mode the rate
# only takes the early return, 2 graphs.
import torch


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    return x * random_tensor / keep_prob


class DropPath(torch.nn.Module):
    def __init__(self, drop_prob=None):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class Block(torch.nn.Module):
    def __init__(self, dim, drop_path_rate):
        super().__init__()
        self.fc = torch.nn.Linear(dim, dim)
        self.drop_path = DropPath(drop_path_rate)

    def forward(self, x):
        return x + self.drop_path(self.fc(x))


torch.manual_seed(0)
depth = 12
dpr = [r.item() for r in torch.linspace(0, 0.1, depth)]
blocks = torch.nn.ModuleList([Block(16, dpr[i]) for i in range(depth)])
for block in blocks:
    block.compile(backend="eager")
x = torch.randn(4, 16)
for step in range(2):
    y = x
    for block in blocks:
        y = block(y)
