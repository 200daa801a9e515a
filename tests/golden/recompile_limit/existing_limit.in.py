# golden: --unsafe-fixes
import torch

torch._dynamo.config.recompile_limit = 16


@torch.compile(dynamic=False)
def step(x, i):
    return (x * i).sum()


for i in range(12):
    print(round(float(step(torch.ones(2), i)), 4))
