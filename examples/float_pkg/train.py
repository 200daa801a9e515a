"""FR003 across modules: `smooth_l1` is compiled in kernels.py and called here.

    python -m examples.float_pkg.train            # from the repo root
    fix-recompiles examples/ --diff
"""

import torch

from .kernels import smooth_l1


def train():
    pred = torch.linspace(0, 2, 8)
    target = torch.zeros(8)
    for epoch in range(10):
        beta = 1.0 / (epoch + 1)
        print(epoch, round(float(smooth_l1(pred, target, beta)), 5))


if __name__ == "__main__":
    train()
