# golden: runtime
import torch


def damp(x, factor):
    return (x - factor).abs().sum()


x = torch.linspace(-1, 1, 5)
for i in range(5):
    print(i, round(float(torch.compile(damp, dynamic=False)(x, 0.1 * i)), 5))
