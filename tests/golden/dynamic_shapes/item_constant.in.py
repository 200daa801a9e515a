# A number read out of a tensor that does not change between iterations is no
# evidence: the scale is read once before the loop, the bias in the loop but
# from a tensor the loop never rebuilds; nor is a draw from two values (a coin
# flip: 2 graphs with or without dynamic=False, measured).
import torch


@torch.compile(dynamic=False)
def step(x, scale, bias, flip):
    return x * scale + bias * flip


weights = torch.tensor([0.5, 2.0])
offsets = torch.tensor([1, 3])
scale = weights.max().item()
for i in range(12):
    bias = int(offsets.sum())
    flip = torch.randint(0, 2, (1,)).item()
    step(torch.ones(4), scale, bias, flip)
