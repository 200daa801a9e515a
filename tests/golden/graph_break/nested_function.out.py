# golden: runtime=nodes
import torch


@torch.compile(dynamic=False)
def fn(x, c):
    def body(y):
        for _ in range(12):
            y = torch.cos(y) * 0.9 + y
        torch._dynamo.graph_break()
        return y.sum() * c

    return body(x)


x = torch.linspace(0, 1, 8)
for c in range(5):
    print(c, round(float(fn(x, c)), 4))
