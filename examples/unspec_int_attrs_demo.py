"""FR005 unspec-int-attrs: a module that counts its calls in `forward`.

torch specialises int attributes of compiled modules, so `self.calls += 1`
makes every call a new graph: 8 graphs, then the model silently runs eager.
`fix-recompiles examples/unspec_int_attrs_demo.py --fix` sets
`torch._dynamo.config.allow_unspec_int_on_nn_module = True` (guarded for
torch < 2.7) before each compile: 2 graphs per model, same outputs.
"""

import torch
from torch import nn


class CallCounter(nn.Module):
    def __init__(self, dim: int = 4):
        super().__init__()
        self.calls = 0
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        self.calls += 1
        return self.proj(x) * self.calls


def main():
    torch.manual_seed(0)
    x = torch.ones(2, 4)

    # wrapped: torch.compile(Model())
    wrapped = torch.compile(CallCounter())
    for _ in range(12):
        print("wrapped", round(float(wrapped(x).sum()), 4))

    # in place: model.compile()
    in_place = CallCounter()
    in_place.compile()
    for _ in range(12):
        print("in place", round(float(in_place(x).sum()), 4))


if __name__ == "__main__":
    main()
