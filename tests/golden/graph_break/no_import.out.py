# golden: runtime=nodes
from torch import compile, linspace, sin
import torch


@compile(dynamic=False)
def fn(x, c):
    y = x
    for _ in range(15):
        y = sin(y) * 1.01 + y
    torch._dynamo.graph_break()
    return y.sum() + c


x = linspace(0, 1, 8)
for c in range(5):
    print(c, round(float(fn(x, c)), 4))
