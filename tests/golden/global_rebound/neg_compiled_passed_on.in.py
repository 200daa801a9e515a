# golden: --unsafe-fixes
# Reported, no fix even with --unsafe-fixes: the compiled function is also
# passed on as a value (`run(shifted, x)`), so not every call is visible to
# add the argument to.
import torch

SHIFT = 0


@torch.compile
def shifted(x):
    return x + SHIFT


def run(fn, x):
    return fn(x)


x = torch.ones(4)
for _ in range(12):
    x = run(shifted, x)
    SHIFT += 1
print(float(x.sum()))
