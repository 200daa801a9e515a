# No finding: a benchmark that resets dynamo before compiling each variant.
import torch

x = torch.ones(3)
for scale in (1, 2, 3):
    torch._dynamo.reset()
    f = torch.compile(lambda t: t * scale)
    print(f(x).sum().item())
