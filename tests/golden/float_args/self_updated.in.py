# golden: runtime
# Floats updated in place or produced by float-returning calls, each passed to
# a compiled function every step: `*=`, `-=`, `max(lr * 0.5, 1e-4)`, `float()`,
# `math.cos()`, `random.random()`.
import math
import random

import torch


@torch.compile(dynamic=False)
def scale(x, c):
    return x * c


@torch.compile(dynamic=False)
def shift(x, c):
    return x - c


def main():
    random.seed(0)
    x = torch.linspace(-1, 1, 5)
    decay = 1.0
    margin = 0.5
    lr = 0.1
    for step in range(6):
        decay *= 0.9
        margin -= 0.01
        lr = max(lr * 0.5, 1e-4)
        ratio = float(step + 1)
        phase = math.cos(step / 3)
        noise = random.random()
        outs = [
            scale(x, decay),
            shift(x, margin),
            scale(x, lr),
            shift(x, ratio),
            scale(x, phase),
            shift(x, noise),
        ]
        print(step, [round(float(o.sum()), 5) for o in outs])


main()
