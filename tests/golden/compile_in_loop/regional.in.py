# No finding: a loop that compiles a different module each iteration.
import torch
import torch.nn as nn

model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(6)])
for i, block in enumerate(model):
    model[i] = torch.compile(block)
print(model(torch.ones(1, 4)).shape)
