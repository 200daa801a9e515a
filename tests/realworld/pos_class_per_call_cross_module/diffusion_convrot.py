from typing import Any, Iterable

import torch.nn.functional as F

DEFAULT_CONVROT_GROUPSIZE = 256


def convrot_linear_class() -> Any:
    """The ``nn.Linear`` subclass that rotates its input."""
    import torch
    from torch import nn

    class ConvRotLinear(nn.Linear):  # expect: FR019
        convrot_groupsize: int = DEFAULT_CONVROT_GROUPSIZE

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            group = self.convrot_groupsize
            x = x.unflatten(-1, (-1, group)).flip(-1).flatten(-2)
            return F.linear(x, self.weight, self.bias)

    return ConvRotLinear


def _install_rotation(module: Any, group_size: int) -> None:
    module.convrot_groupsize = int(group_size)
    module.__class__ = convrot_linear_class()


def rotate_linears_(model: Any, fqns: Iterable[str], group_size: int) -> None:
    modules = dict(model.named_modules())
    for fqn in fqns:
        _install_rotation(modules[fqn], group_size)
