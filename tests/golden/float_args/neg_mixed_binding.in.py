# A float on one path, a tensor or an unknown value on another: no finding.
import torch


@torch.compile
def scale(x, c):
    return x * c


def run(x, warm, start):
    t = 1.0
    s = start
    for step in range(4):
        if step == warm:
            t = torch.tensor(0.5)
        t = t * 0.9
        s = s * 0.9
        scale(x, t)
        scale(x, s)


run(torch.ones(3), 2, torch.tensor(2.0))
