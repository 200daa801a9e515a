# golden: --unsafe-fixes --target-torch 2.7 runtime=limit_hits
import torch


@torch.compile(dynamic=False)
def pad(x, n):
    return torch.nn.functional.pad(x, (0, n)).sum()


torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 9)
for n in range(9):
    print(n, round(float(pad(torch.ones(2), n)), 4))
