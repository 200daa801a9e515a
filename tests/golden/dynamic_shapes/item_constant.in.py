# A number read out of a tensor that does not change between iterations is no
# evidence: the scale is read once before the loop, the bias in the loop but
# from a tensor the loop never rebuilds.
import torch


@torch.compile(dynamic=False)
def step(x, scale, bias):
    return x * scale + bias


weights = torch.tensor([0.5, 2.0])
offsets = torch.tensor([1, 3])
scale = weights.max().item()
for i in range(12):
    bias = int(offsets.sum())
    step(torch.ones(4), scale, bias)
