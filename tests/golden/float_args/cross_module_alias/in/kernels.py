import torch


def _leaky(x, slope):
    return torch.where(x > 0, x, x * slope).sum()


leaky = torch.compile(_leaky, dynamic=False)
