# golden: runtime=nodes
import torch as th


@th.compile(dynamic=False)
def fn(x, c):
    y = x
    for _ in range(15):
        y = th.sin(y) * 1.01 + y
    th._dynamo.graph_break()
    return y.sum() + c


x = th.linspace(0, 1, 8)
for c in range(5):
    print(c, round(float(fn(x, c)), 4))
