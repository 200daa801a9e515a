# realworld: negative graphs=2
# Pattern: unslothai/unsloth at 186e6cb5c1 (PR #8357), the fix:
# `@lru_cache(maxsize = None)` on `convrot_linear_class`, so every rotated
# projection gets the one `ConvRotLinear` class and the blocks compiled one by
# one share their compiled `forward`. FR019 stays quiet (the factory is
# cached).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs for 4 blocks.
from functools import lru_cache
from typing import Any, Iterable

import torch
import torch.nn as nn

DEFAULT_CONVROT_GROUPSIZE = 4
_HADAMARD_CACHE: dict = {}


def build_convrot_hadamard(size: int, device: Any = "cpu", dtype: Any = None) -> Any:
    import torch

    if dtype is None:
        dtype = torch.float32
    key = (size, str(device), dtype)
    cached = _HADAMARD_CACHE.get(key)
    if cached is not None:
        return cached
    h4 = torch.tensor([[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]], dtype = dtype, device = device)
    h = h4 / (size**0.5)
    _HADAMARD_CACHE[key] = h
    return h


def rotate_convrot_activation(x: Any, h: Any, group_size: int) -> Any:
    """``x @ H`` blockwise over the last dimension."""
    shape = x.shape
    features = shape[-1]
    grouped = x.reshape(-1, features // group_size, group_size)
    return grouped.matmul(h.to(dtype = x.dtype, device = x.device)).reshape(shape)


@lru_cache(maxsize = None)
def convrot_linear_class() -> Any:
    """The ``nn.Linear`` subclass that rotates its input, built lazily so importing this module
    never imports torch."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class ConvRotLinear(nn.Linear):
        """``nn.Linear`` whose input is block-Hadamard rotated before the matmul."""

        convrot_groupsize: int = DEFAULT_CONVROT_GROUPSIZE

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            group = self.convrot_groupsize
            h = build_convrot_hadamard(group, device = x.device, dtype = x.dtype)
            return F.linear(rotate_convrot_activation(x, h, group), self.weight, self.bias)

    return ConvRotLinear


def _install_rotation(module: Any, group_size: int) -> None:
    """Swap ``module`` onto the rotating subclass, in place."""
    module.convrot_groupsize = int(group_size)
    module.__class__ = convrot_linear_class()


def rotate_linears_(transformer: Any, fqns: Iterable[str], group_size: int = DEFAULT_CONVROT_GROUPSIZE) -> tuple:
    """OFFLINE half: install the online rotation on each of ``fqns``."""
    modules = dict(transformer.named_modules())
    rotated = []
    for fqn in fqns:
        module = modules.get(fqn)
        _install_rotation(module, group_size)
        rotated.append(fqn)
    return tuple(rotated)


class FeedForward(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.nn.functional.gelu(self.proj(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = FeedForward(dim)

    def forward(self, hidden_states):
        return hidden_states + self.ff(self.norm(hidden_states))


class Transformer(nn.Module):  # diffusers.models.modeling_utils.ModelMixin, trimmed
    _repeated_blocks = ["TransformerBlock"]

    def __init__(self, dim=8, depth=4):
        super().__init__()
        self.transformer_blocks = nn.ModuleList([TransformerBlock(dim) for _ in range(depth)])

    def compile_repeated_blocks(self, *args, **kwargs):
        repeated_blocks = getattr(self, "_repeated_blocks", None)
        for submod in self.modules():
            if submod.__class__.__name__ in repeated_blocks:
                submod.compile(*args, **kwargs)

    def forward(self, hidden_states):
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states)
        return hidden_states


torch.manual_seed(0)
transformer = Transformer()
rotate_linears_(transformer, [f"transformer_blocks.{i}.ff.proj" for i in range(4)])
transformer.compile_repeated_blocks()
with torch.no_grad():
    out = transformer(torch.randn(2, 3, 8))
print(round(float(out.sum()), 4))
