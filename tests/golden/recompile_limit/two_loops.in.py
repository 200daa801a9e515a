# golden: --unsafe-fixes runtime=limit_hits
import torch


@torch.compile(dynamic=False)
def affine(x, k):
    return (x * k - k).sum()


x = torch.ones(4)
# warm-up offsets, then the real ones: all share one cache of compiled variants
for k in range(6):
    print("warm", k, round(float(affine(x, k)), 4))
for k in range(6, 15):
    print("run", k, round(float(affine(x, k)), 4))
