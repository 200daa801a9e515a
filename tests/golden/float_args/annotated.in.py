# golden: runtime
import torch


@torch.compile(dynamic=False)
def scale(x, s):
    return (x * s).sum()


def run(n: int, factor: float):
    x = torch.ones(3)
    return scale(x, factor)


for v in (0.5, 1.5, 2.5, 3.5):
    print(v, round(float(run(3, v)), 4))
