# golden: --unsafe-fixes --target-torch 2.13 runtime=limit_hits
import torch


def body(x, n):
    return torch.tanh(x[:n]).sum()


step = torch.compile(
    body,
    dynamic=False,
)

x = torch.randn(16)
for n in range(1, 13):
    print(n, round(float(step(x, n)), 4))
