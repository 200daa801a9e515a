# Reported, no fix. Measured (torch 2.13 CPU): the first call raises
# AssertionError: Attempt to trace forbidden callable <function mark_dynamic>.
import torch


@torch.compile
def scale(x):
    torch._dynamo.mark_dynamic(x, 0)
    return x * 2
