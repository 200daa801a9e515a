"""A function compiled by a project decorator that calls torch.compile lazily
in the closure it returns; a float argument changes every step."""
import functools

import torch


def maybe_compile(fn):
    compiled = None

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        nonlocal compiled
        if compiled is None:
            # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
            compiled = torch.compile(fn, backend="eager")
        return compiled(*args, **kwargs)

    return wrapper


@maybe_compile
def scaled_residual(x, y, alpha):
    return x + y * alpha


x = torch.linspace(-1.0, 1.0, 4)
y = torch.linspace(0.0, 1.0, 4)
for step in range(10):
    alpha = 1.0 / (step + 1)
    x = scaled_residual(x, y, alpha)
print("result:", [round(v, 4) for v in x.tolist()])
