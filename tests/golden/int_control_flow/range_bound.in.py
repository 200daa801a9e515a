# Reported, no fix. Measured (torch 2.13 CPU, counting backend, n = 1..12):
# 8 graphs, then the recompile limit (eager); the same with dynamic=True.
import torch


@torch.compile
def refine(x, n_steps):
    for _ in range(n_steps):
        x = torch.tanh(x * 1.5)
    return x


x = torch.ones(4)
for n_steps in range(1, 13):
    print(round(refine(x, n_steps).sum().item(), 4))
