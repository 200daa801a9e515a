import torch


@torch.compile(dynamic=False)
def smooth_l1(pred, target, beta):
    diff = (pred - target).abs()
    return torch.where(diff < beta, 0.5 * diff * diff / beta, diff - 0.5 * beta).mean()
