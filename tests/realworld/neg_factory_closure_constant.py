# realworld: negative graphs=1
# Twin of pos_factory_closure_dataclass (issue 27, form 8): the same
# factory-made closure, compiled and stored on a dataclass, called through
# the field with a constant factor: nothing it is guarded on changes.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 8 steps.
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
    state.ema = state.ema_fn(state.ema, param, 0.5)
print([round(v, 4) for v in state.ema.tolist()])
