"""A float kept in a dict attribute of a submodule, rewritten by an eager
helper between calls (peft's LoRA `scaling[adapter]`, hot-swapped before
#2177's prepare_model_for_compiled_hotswap): the compiled model guards the
float's value and recompiles on the next one (2 graphs; then automatic
dynamic)."""
import torch


class Adapter(torch.nn.Module):
    def __init__(self, dim, alpha, r):
        super().__init__()
        self.base = torch.nn.Linear(dim, dim)
        self.down = torch.nn.Linear(dim, r, bias=False)
        self.up = torch.nn.Linear(r, dim, bias=False)
        self.scaling = {}
        self.scaling["default"] = alpha / r

    def forward(self, x):
        scaling = self.scaling["default"]
        return self.base(x) + self.up(self.down(x)) * scaling


class Model(torch.nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.layers = torch.nn.ModuleList([Adapter(dim, 8, 4) for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def swap_alpha(model, alpha, r=4):
    for module in model.modules():
        if isinstance(module, Adapter):
            if isinstance(module.scaling["default"], torch.Tensor):
                module.scaling["default"].fill_(alpha / r)
            else:
                module.scaling["default"] = alpha / r


torch.manual_seed(0)
model = Model()
compiled = torch.compile(model, backend="eager")
x = torch.randn(2, 8)
total = 0.0
with torch.no_grad():
    for alpha in (8, 16, 4, 12):
        swap_alpha(model, alpha)
        total += float(compiled(x).sum())
print("result:", round(total, 4))
