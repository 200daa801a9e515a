# realworld: positive fix=unsafe graphs=2
# Pattern (issue 27, form 8: compiles reached through closures and
# factories): a step function made by a factory (`make_ema_step(decay)`
# returns the closure `ema_step`), compiled, and stored on a dataclass the
# training loop carries (`state.ema_fn`); the loop calls it through the
# field with a warm-up factor that changes every step. The compile's target
# is the factory's returned closure, its calls are `state.ema_fn(...)`.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 8 steps (the float turns dynamic after one recompile); with
# the factor a 0-d tensor (unsafe: `decay`, a closure variable, is not
# visibly a float to the analysis), 1, same output.
from dataclasses import dataclass
from typing import Callable

import torch


def make_ema_step(decay):
    def ema_step(ema, param, warmup):
        d = decay * warmup
        return ema * d + param * (1.0 - d)

    return ema_step


@dataclass
class TrainState:
    ema: torch.Tensor
    ema_fn: Callable


torch.manual_seed(0)
param = torch.randn(4)
state = TrainState(ema=torch.zeros(4), ema_fn=torch.compile(make_ema_step(0.999)))
for step in range(8):
    param = param - 0.1 * torch.randn(4)
    state.ema = state.ema_fn(state.ema, param, (1 + step) / (10 + step))  # expect: FR003
print([round(v, 4) for v in state.ema.tolist()])
