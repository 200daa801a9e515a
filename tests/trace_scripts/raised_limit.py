# A program that raised the recompile limit (timm.optim does it at import:
# torch._dynamo.config.cache_size_limit = 1_000_000): a dynamic=False function
# called with 12 shapes compiles 12 graphs and never falls back to eager, so
# no "limit hit" shows; the trace's compilation_metrics record the limit.
import torch

torch._dynamo.config.cache_size_limit = 1_000_000


@torch.compile(backend="eager", dynamic=False)
def scale(x):
    return x * 2


for n in range(1, 13):
    scale(torch.randn(n))
