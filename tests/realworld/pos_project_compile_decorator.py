# realworld: positive fix=safe graphs=2
# Pattern: issue 12, form 5 (seen in public training code, not in the seven
# pinned repos): a project-defined decorator that calls `torch.compile` lazily
# in a closure, with `dynamic=` from a module-level setting. (The pinned repos
# route compiles through project functions too -- pytorch/torchtune
# torchtune/training/_compile.py, pytorch/torchtitan `apply_compile` -- but
# eagerly.) The compiled function is reachable only through the project's
# decorator, and gets a float that changes every step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps; hand-fixed (alpha as a float64 0-d tensor at the
# call): 1, same output.
import functools

import torch

COMPILE_DYNAMIC = None


def maybe_compile(fn):
    compiled = None

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        nonlocal compiled
        if compiled is None:
            compiled = torch.compile(fn, dynamic=COMPILE_DYNAMIC, backend="eager")
        return compiled(*args, **kwargs)

    return wrapper


@maybe_compile
def scaled_residual(x, y, alpha):
    return x + y * alpha


torch.manual_seed(0)
x = torch.randn(4)
y = torch.randn(4)
for step in range(10):
    alpha = 1.0 / (step + 1)
    x = scaled_residual(x, y, alpha)  # expect: FR003
print([round(v, 4) for v in x.tolist()])
