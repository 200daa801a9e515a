# Reported, no fix. Measured (torch 2.13 CPU, counting backend, 12
# iterations): 8 graphs, then the recompile limit (eager).
import torch

x = torch.ones(3)
for i in range(12):
    f = torch.compile(lambda t: t * 2 + i)
    print(f(x).sum().item())
