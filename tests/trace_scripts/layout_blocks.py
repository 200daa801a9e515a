"""Blocks compiled one by one by a helper that picks them by class name
(diffusers' compile_repeated_blocks: `submod.compile()` in a loop over
`self.modules()`), so they share one code object; the first block gets
`x.flatten(2).transpose(1, 2)`, which is not contiguous, each next block the
contiguous output of the one before: the stride guard fails once (2 graphs;
diffusers' WanAnimate before dd680ee627)."""
import torch


class Block(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.ff = torch.nn.Linear(dim, dim)

    def forward(self, hidden_states, scale):
        return self.ff(self.norm(hidden_states)) * scale + hidden_states


class Model(torch.nn.Module):
    _repeated_blocks = ["Block"]

    def __init__(self, dim=16, depth=3):
        super().__init__()
        self.patch = torch.nn.Conv2d(3, dim, 2, stride=2)
        self.blocks = torch.nn.ModuleList([Block(dim) for _ in range(depth)])

    def compile_repeated_blocks(self, **kwargs):
        for submod in self.modules():
            if submod.__class__.__name__ in self._repeated_blocks:
                submod.compile(**kwargs)

    def forward(self, x, scale):
        hidden_states = self.patch(x).flatten(2).transpose(1, 2)
        for block in self.blocks:
            hidden_states = block(hidden_states, scale)
        return hidden_states.mean()


torch.manual_seed(0)
model = Model()
model.compile_repeated_blocks(backend="eager")
total = 0.0
with torch.no_grad():
    for step in range(3):
        total += float(model(torch.randn(2, 3, 8, 8), torch.tensor(0.5)))
print("result:", round(total, 4))
