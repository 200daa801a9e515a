# golden: runtime=nodes
import torch


@torch.compile(dynamic=False)
def fn(x, c):
    y = x
    for _ in range(15):
        y = torch.sin(y) * 1.01 + y

    # the expensive part ends here

    torch._dynamo.graph_break()
    # the tail below changes with c
    # (c is an int and dynamic=False)

    return y.sum() + c


x = torch.linspace(0, 1, 8)
for c in range(5):
    print(c, round(float(fn(x, c)), 4))
