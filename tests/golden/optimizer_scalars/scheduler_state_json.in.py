# The scheduler's state as JSON: its base_lrs and _last_lr become tensors
# and json.dumps raises (found by an audit): unsafe.
import copy
import json
import operator
import pickle
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
hist = []


@torch.compile(backend="eager")
def train_step(x, y):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


x = torch.randn(16, 4)
y = torch.randn(16, 2)
for step in range(4):
    loss = train_step(x, y)
    scheduler.step()
    print(f"step {step}: loss {loss.item():.6f}", json.dumps(scheduler.state_dict()))
