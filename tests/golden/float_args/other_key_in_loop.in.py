# The loop writes the group's step, not its eps: the eps the kernel gets is
# the same on every call (HeavyBall's shampoo wrapper passed
# eps=group["eps"] while its loop advanced group["step"]: a survey's false
# finding, 1 graph over 36 calls).  No finding.
import torch


@torch.compile(dynamic=False)
def kernel(x, eps):
    return x.clamp_min(eps)


def apply(group, x, eps=1e-8):
    return kernel(x, eps)


group = {"eps": 1e-8, "step": 0}
for step in range(12):
    group["step"] = step
    apply(group, torch.ones(3), eps=group["eps"])
