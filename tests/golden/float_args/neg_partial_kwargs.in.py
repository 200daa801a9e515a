# Floats passed through functools.partial or a **kwargs dict are not seen as
# arguments of the compiled call: no finding (and no crash).
import functools

import torch


@torch.compile
def scale(x, c=1.0):
    return x * c


def _blend(a, b, alpha):
    return a * alpha + b * (1 - alpha)


blend = torch.compile(functools.partial(_blend, alpha=0.25))
half = functools.partial(scale, c=0.5)
options = {"c": 0.75}
args = (torch.ones(3), 0.5)
for step in range(3):
    kw = dict(c=0.1 * step)
    half(torch.ones(3))
    scale(torch.ones(3), **options)
    scale(torch.ones(3), **kw)
    scale(*args)
    blend(torch.ones(3), torch.zeros(3))
