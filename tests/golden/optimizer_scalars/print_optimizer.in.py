# `print(optimizer)` shows every group's lr: with a tensor lr it prints
# 0.0010000000474974513 for 0.001 (found by an audit): unsafe.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)


@torch.compile(backend="eager")
def train_step(x, y):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


x = torch.randn(8, 4)
y = torch.randn(8, 2)
for epoch in range(6):
    loss = train_step(x, y)
    scheduler.step()
    print(f"epoch {epoch}: loss {loss.item():.6f}")
print(optimizer)
