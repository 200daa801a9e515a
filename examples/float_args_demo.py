"""FR003 demo: Python floats reaching compiled functions.

    fix-recompiles examples/float_args_demo.py --diff

The temperature (annealed: rebuilt from itself every step, the classic
sampling loop), loss weight and blend factor are fixed by `--fix` (wrapped in
`torch.tensor(..., dtype=torch.float64)` at the call only: the loop keeps
using `temperature` as a Python float); `quantize` feeds its float to
`round()` and is only reported.
"""

import torch
import torch.nn.functional as F


@torch.compile(dynamic=False)
def sample_probs(logits, temperature):
    return torch.softmax(logits / temperature, dim=-1)


@torch.compile
def mixed_loss(pred, target, weight):
    return weight * F.mse_loss(pred, target) + (1 - weight) * F.l1_loss(pred, target)


@torch.compile(dynamic=False)
def blend(a, b, *, alpha):
    return a * alpha + b * (1 - alpha)


@torch.compile
def quantize(x, step):
    return x * round(step, 2)


def main():
    torch.manual_seed(0)
    logits = torch.randn(2, 5)
    pred = torch.randn(8)
    target = torch.randn(8)
    a = torch.linspace(0, 1, 6)
    b = torch.linspace(1, 2, 6)
    temperature = 1.0
    for step in range(10):
        temperature = max(temperature * 0.9, 0.5)
        probs = sample_probs(logits, temperature)
        loss = mixed_loss(pred, target, weight=0.9**step)
        mix = blend(a, b, alpha=step / 9)
        q = quantize(a, 0.1 * step)
        print(step, round(temperature, 5), round(float(probs.max()), 5), round(float(loss), 5), round(float(mix.sum()), 5), round(float(q.sum()), 5))


if __name__ == "__main__":
    main()
