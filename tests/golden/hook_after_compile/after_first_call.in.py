# Reported, no fix (FR012). Measured (torch 2.13 CPU): the hooks registered
# after the compiled model's first call (on the model and on a submodule) are
# never run by later calls; eager runs them. Not a recompile: 1 graph.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
compiled = torch.compile(model)
x = torch.randn(2, 4)
compiled(x)
seen = []
model.register_forward_hook(lambda m, i, o: seen.append("model"))
model[0].register_forward_pre_hook(lambda m, i: seen.append("linear"))
compiled(x)
print(seen)
