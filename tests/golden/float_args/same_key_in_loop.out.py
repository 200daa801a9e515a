# golden: runtime
# The loop writes the very key the kernel gets: a new eps every call, a new
# graph under dynamic=False.
import torch


@torch.compile(dynamic=False)
def kernel(x, eps):
    return x.clamp_min(eps)


def apply(group, x, eps=1e-8):
    return kernel(x, torch.tensor(eps, dtype=torch.float64))


group = {"eps": 1e-8, "step": 0}
total = 0.0
for step in range(12):
    group["step"] = step
    group["eps"] = 0.1 * (step + 1)
    total += apply(group, torch.zeros(3), eps=group["eps"]).sum().item()
print("total", round(total, 4))
