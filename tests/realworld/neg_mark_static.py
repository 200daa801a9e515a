# realworld: negative graphs=1
# Pattern: issue 12 lists `torch._dynamo.mark_static` among deliberate static
# compiles (none of the seven pinned repos calls it): a static input buffer,
# refilled every step and pinned with `mark_static`, fed to a `dynamic=False`
# compiled function. The author asked for static shapes, and the shapes do not
# change.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 10 calls.
import torch


@torch.compile(dynamic=False, backend="eager")
def rmsnorm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


torch.manual_seed(0)
weight = torch.ones(16)
batch = torch.randn(4, 16)
x = torch.empty(4, 16)  # static input buffer, refilled every step
torch._dynamo.mark_static(x, 0)
total = 0.0
for step in range(10):
    x.copy_(batch * (step + 1))
    total += rmsnorm(x, weight).sum().item()
print(round(total, 4))
