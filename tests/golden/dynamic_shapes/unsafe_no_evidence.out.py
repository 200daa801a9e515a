# golden: runtime --unsafe-fixes --unproven
import torch


def batches():
    return [torch.ones(n) for n in range(1, 11)]


@torch.compile()
def total(x):
    return (x * 3).sum()


for i, batch in enumerate(batches()):
    print(i, round(float(total(batch)), 4))
