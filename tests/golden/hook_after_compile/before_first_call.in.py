# No finding: the hook is registered before the compiled model's first call,
# so it is traced into the graph and runs on every call (torch 2.13 CPU).
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
seen = []
model.register_forward_hook(lambda m, i, o: seen.append("model"))
compiled = torch.compile(model)
x = torch.randn(2, 4)
compiled(x)
compiled(x)
print(seen)
