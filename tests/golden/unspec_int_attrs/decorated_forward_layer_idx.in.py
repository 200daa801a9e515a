# golden: runtime
# `@torch.compile` on a block's forward (unsloth's compiled layers): every
# instance runs one code object, and each reads its own `self.layer_idx`,
# an int torch specialises on a module: 12 blocks give 8 graphs and the
# recompile limit. With allow_unspec_int_on_nn_module, 2 graphs.
import torch


class Block(torch.nn.Module):
    def __init__(self, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.lin = torch.nn.Linear(8, 8)

    @torch.compile
    def forward(self, x):
        return torch.tanh(self.lin(x)) * (1.0 + 0.01 * self.layer_idx)


class Model(torch.nn.Module):
    def __init__(self, n_layer=12):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(i) for i in range(n_layer)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


torch.manual_seed(0)
model = Model()
x = torch.randn(2, 8)
print("out", round(float(model(x).sum()), 4))
