# studio/backend/core/inference/diffusion_convrot.py
from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, Optional, Tuple
import math


CONVROT_KIND = "convrot_hadamard_v1"
ROTATION_KEY = "activation_rotation"
ROTATION_GROUP_KEY = "activation_rotation_group"
ROTATION_FQNS_KEY = "activation_rotation_fqns"
DEFAULT_CONVROT_GROUPSIZE = 256
CONVROT_ATTR = "_unsloth_activation_rotation"


def is_power_of_four(size: Any) -> bool:
    if not isinstance(size, int) or isinstance(size, bool):
        return False
    n = size
    if n < 4 or n & (n - 1):
        return False
    return (n.bit_length() - 1) % 2 == 0


_HADAMARD_CACHE: dict = {}


def build_convrot_hadamard(
    size: int,
    device: Any = "cpu",
    dtype: Any = None,
) -> Any:
    import torch

    if dtype is None:
        dtype = torch.float32
    key = (size, str(device), dtype)
    cached = _HADAMARD_CACHE.get(key)
    if cached is not None:
        return cached
    if not is_power_of_four(size):
        raise ValueError(f"ConvRot group size must be a power of 4, got {size}")
    h4 = torch.tensor(
        [[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]],
        dtype = dtype,
        device = device,
    )
    h = h4
    current = 4
    while current < size:
        h = torch.kron(h, h4)
        current *= 4
    h = h / (size**0.5)
    _HADAMARD_CACHE[key] = h
    return h


def rotate_convrot_activation(x: Any, h: Any, group_size: int) -> Any:
    """``x @ H`` blockwise over the last dimension."""
    shape = x.shape
    features = shape[-1]
    if features % group_size != 0:
        raise ValueError(f"features {features} not divisible by ConvRot group {group_size}")
    grouped = x.reshape(-1, features // group_size, group_size)
    return grouped.matmul(h.to(dtype = x.dtype, device = x.device)).reshape(shape)


def rotate_convrot_weight_(module: Any, group_size: int) -> None:
    import torch

    weight = module.weight.data
    out_features, in_features = weight.shape
    if in_features % group_size:
        raise ValueError(
            f"in_features {in_features} is not divisible by the ConvRot group {group_size}"
        )
    h = build_convrot_hadamard(group_size, device = weight.device, dtype = torch.float32)
    rotated = torch.matmul(
        weight.float().reshape(out_features, in_features // group_size, group_size), h.T
    ).reshape(out_features, in_features)
    module.weight.data = rotated.to(weight.dtype)


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

        def extra_repr(self) -> str:  # pragma: no cover - debug aid
            return f"{super().extra_repr()}, convrot(group={self.convrot_groupsize})"

    return ConvRotLinear


def is_rotated_linear(module: Any) -> bool:
    """True when ``module`` already applies the online rotation to its own input."""
    return type(module).__name__ == "ConvRotLinear" and hasattr(module, "convrot_groupsize")


def _install_rotation(module: Any, group_size: int) -> None:
    """Swap ``module`` onto the rotating subclass, in place."""
    module.convrot_groupsize = int(group_size)
    module.__class__ = convrot_linear_class()


def declares_rotation(metadata: Any) -> bool:
    return isinstance(metadata, dict) and metadata.get(ROTATION_KEY) not in (None, "")


def rotation_metadata_error(metadata: Any) -> Optional[str]:
    if not declares_rotation(metadata):
        return None
    kind = metadata.get(ROTATION_KEY)
    if kind != CONVROT_KIND:
        return f"unsupported activation rotation {kind!r} (this build implements {CONVROT_KIND!r})"
    group = metadata.get(ROTATION_GROUP_KEY)
    if not is_power_of_four(group):
        return (
            f"activation rotation group {group!r} is not a power of 4; the Hadamard is built as a "
            "kron power of H4"
        )
    fqns = metadata.get(ROTATION_FQNS_KEY)
    if not isinstance(fqns, (list, tuple)) or not fqns:
        return f"activation rotation records no fqns ({ROTATION_FQNS_KEY} is {fqns!r})"
    if not all(isinstance(fqn, str) and fqn for fqn in fqns):
        return f"activation rotation {ROTATION_FQNS_KEY} has non-string entries"
    if len(set(fqns)) != len(fqns):
        return f"activation rotation {ROTATION_FQNS_KEY} has duplicates"
    return None


def rotation_metadata(group_size: int, fqns: Iterable[str]) -> dict:
    return {
        ROTATION_KEY: CONVROT_KIND,
        ROTATION_GROUP_KEY: int(group_size),
        ROTATION_FQNS_KEY: sorted(fqns),
    }


def rotatable_fqns(
    transformer: Any,
    filter_fn: Any,
    group_size: int = DEFAULT_CONVROT_GROUPSIZE,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    from torch import nn

    rotatable: list[str] = []
    not_divisible: list[str] = []
    for fqn, module in transformer.named_modules():
        if not isinstance(module, nn.Linear) or not filter_fn(module, fqn):
            continue
        (rotatable if module.in_features % group_size == 0 else not_divisible).append(fqn)
    return tuple(rotatable), tuple(not_divisible)


def rotate_linears_(
    transformer: Any,
    fqns: Iterable[str],
    group_size: int = DEFAULT_CONVROT_GROUPSIZE,
) -> tuple[str, ...]:
    """OFFLINE half: rotate the weights of ``fqns`` and install the online rotation on each."""
    from torch import nn

    if not is_power_of_four(group_size):
        raise ValueError(f"ConvRot group size must be a power of 4, got {group_size!r}")
    modules = dict(transformer.named_modules())
    rotated: list[str] = []
    for fqn in fqns:
        module = modules.get(fqn)
        if not isinstance(module, nn.Linear):
            raise ValueError(f"cannot rotate {fqn!r}: not an nn.Linear on this model")
        rotate_convrot_weight_(module, group_size)
        _install_rotation(module, group_size)
        rotated.append(fqn)
    return tuple(rotated)


def apply_activation_rotation(
    transformer: Any,
    metadata: Any,
    *,
    logger: Any = None,
) -> tuple[str, ...]:
    """ONLINE half: install the input rotation on exactly the fqns ``metadata`` records."""
    if not declares_rotation(metadata):
        return ()
    problem = rotation_metadata_error(metadata)
    if problem:
        raise ValueError(problem)

    from torch import nn

    group_size = int(metadata[ROTATION_GROUP_KEY])
    fqns = list(metadata[ROTATION_FQNS_KEY])
    modules = dict(transformer.named_modules())
    missing = [fqn for fqn in fqns if fqn not in modules]
    if missing:
        raise ValueError(
            f"activation rotation names {len(missing)} fqn(s) this model does not have "
            f"(e.g. {missing[0]!r}); the checkpoint and this build disagree about the model"
        )
    for fqn in fqns:
        module = modules[fqn]
        if not isinstance(module, nn.Linear):
            raise ValueError(f"activation rotation target {fqn!r} is not an nn.Linear")
        if is_rotated_linear(module):
            raise ValueError(f"activation rotation target {fqn!r} is already rotated")
        if module.in_features % group_size:
            raise ValueError(
                f"activation rotation target {fqn!r} has in_features {module.in_features}, "
                f"which the recorded group {group_size} does not divide"
            )
    for fqn in fqns:
        _install_rotation(modules[fqn], group_size)
    try:
        setattr(
            transformer,
            CONVROT_ATTR,
            {"kind": CONVROT_KIND, "group": group_size, "linears": len(fqns)},
        )
    except Exception:  # noqa: BLE001 -- the marker is a diagnostic, never the mechanism
        pass
    if logger is not None:
        logger.info(
            "diffusion.convrot: installed %s on %d linears at group %d",
            CONVROT_KIND,
            len(fqns),
            group_size,
        )
    return tuple(fqns)


