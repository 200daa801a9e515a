# realworld: positive fix=safe graphs=2
# Pattern: issue 12, form 3 (`*args` half): a float reaches the compiled
# function through a helper that forwards positional arguments unchanged
# (`run_update(fn, *args)`), the way trainers wrap steps for timing, retries or
# profiling. An EMA decay with warm-up changes every step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps; hand-fixed (decay as a float64 0-d tensor at the
# call): 1, same output.
import torch


@torch.compile(backend="eager")
def ema_update(ema, param, decay):
    ema.mul_(decay).add_(param, alpha=1.0)
    ema.sub_(param * decay)


def run_update(fn, *args):
    return fn(*args)


torch.manual_seed(0)
ema = torch.zeros(4)
param = torch.randn(4)
for step in range(10):
    decay = min(0.999, (1 + step) / (10 + step))
    run_update(ema_update, ema, param, decay)  # expect: FR003
print([round(v, 4) for v in ema.tolist()])
