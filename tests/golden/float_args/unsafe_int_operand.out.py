# golden: runtime --unsafe-fixes
# The other operand is not visibly a floating tensor: unsafe, applied with --unsafe-fixes.
import torch


@torch.compile(dynamic=False)
def scale(x, c):
    return (x * c).sum()


def run(data):
    for i in range(5):
        print(i, round(float(scale(data, torch.tensor(0.5 * i, dtype=torch.float64))), 4))


run(torch.linspace(0, 1, 4))
