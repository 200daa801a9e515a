"""fullgraph=True and dynamic=False, a float new every step beside a rank
that alternates (HeavyBall's adam before a5d4a80: beta2 = 1 - step ** -0.8
reached the kernel as a Python float): the 9th compile raises
FailOnRecompileLimitHit and the program exits 1.  Every recompile also fails
the entries of the other rank on rank, which takes 2 values only."""
import torch


@torch.compile(backend="eager", dynamic=False, fullgraph=True)
def ema_(avg, grad, beta2):
    return avg.mul_(beta2).add_(grad * (1 - beta2))


params = [torch.ones(4, 4), torch.ones(4)]
total = 0.0
for step in range(1, 7):
    beta2 = 1 - step ** -0.8
    for p in params:
        total += float(ema_(p.clone(), torch.full_like(p, 0.5), beta2).sum())
print("result:", round(total, 4))
