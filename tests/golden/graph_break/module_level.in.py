import torch

# fix-recompiles: graph-break
x = torch.ones(3)


class Config:
    # fix-recompiles: graph-break
    size = 3


print(float(x.sum()), Config.size)
# fix-recompiles: graph-break
