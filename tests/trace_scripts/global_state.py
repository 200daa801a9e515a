"""Recompiles on global state and tensor metadata: grad mode, autocast,
requires_grad."""
import torch


@torch.compile(backend="eager")
def under_grad_mode(x):
    return x * 2


@torch.compile(backend="eager")
def under_autocast(x):
    return x + 1


@torch.compile(backend="eager")
def maybe_grad(x):
    return x * 3


x = torch.ones(3)
total = 0.0
total += float(under_grad_mode(x).sum())
with torch.no_grad():
    total += float(under_grad_mode(x).sum())
total += float(under_autocast(x).sum())
with torch.autocast("cpu"):
    total += float(under_autocast(x).sum())
total += float(maybe_grad(x).sum())
total += float(maybe_grad(x.clone().requires_grad_()).sum())
print("result:", round(total, 3))
