# Reported, no fix: a helper rebinds the float global SCALE between calls.
# Measured (torch 2.13 CPU, counting backend, 12 values): 2 graphs (the
# first change recompiles; then automatic dynamic makes the float dynamic).
import torch

SCALE = 1.0


def decay():
    global SCALE
    SCALE *= 0.5


@torch.compile
def scaled(x):
    return x * SCALE


x = torch.ones(4)
for _ in range(12):
    x = scaled(x)
    decay()
print(float(x.sum()))
