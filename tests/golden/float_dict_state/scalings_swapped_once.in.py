# golden: --unsafe-fixes
# No change: the scaling is rewritten by eager code, but only before the
# model is compiled and called (no loop runs the write between calls), and
# the forward returns the dict's value itself (a use a 0-d tensor would
# change): no default finding, and with --unproven no fix.
import torch
import torch.nn as nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scaling = {"default": 0.5}

    def forward(self, x):
        return self.lin(x) * self.scaling["default"]

    def current_scaling(self):
        return self.scaling["default"]


def set_scaling(module, value):
    module.scaling["default"] = value / 2


inner = Scaled()
set_scaling(inner, 3.0)
model = torch.compile(inner)
print(model(torch.ones(1, 4)).shape)
