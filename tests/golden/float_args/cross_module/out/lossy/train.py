import torch

from .kernels import smooth_l1


def train():
    pred = torch.linspace(0, 2, 8)
    target = torch.zeros(8)
    for epoch in range(6):
        beta = 1.0 / (epoch + 1)
        print(epoch, round(float(smooth_l1(pred, target, torch.tensor(beta, dtype=torch.float64))), 5))
