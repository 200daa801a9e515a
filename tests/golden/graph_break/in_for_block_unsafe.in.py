# golden: --unsafe-fixes
import torch


@torch.compile(dynamic=False)
def fn(x, c):
    i = 0
    while i < 2:
        x = torch.tanh(x) + x
        # fix-recompiles: graph-break
        i += 1
    try:
        x = x * 2
        # fix-recompiles: graph-break
    finally:
        pass
    return x.sum() + c
