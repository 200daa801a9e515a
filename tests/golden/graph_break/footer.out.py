# golden: runtime=nodes
import torch


def heavy(x, out):
    for _ in range(15):
        x = torch.sin(x) * 1.1 + x
    out.append(x)
    torch._dynamo.graph_break()


@torch.compile(dynamic=False)
def fn(x, c):
    out = []
    heavy(x, out)
    return out[0].sum() + c


x = torch.linspace(0, 1, 8)
for c in range(5):
    print(c, round(float(fn(x, c)), 4))
