# realworld: positive fix=safe graphs=2
# Pattern: pytorch/torchtune (torchtune/modules/loss/kd_losses.py at
# bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1: `self.fkl_loss =
# torch.compile(self.fkl_loss, *args, **kwargs)`) and trainer helpers that
# forward positional arguments unchanged: a float reaches the compiled
# function through a `*args` forwarder.
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
