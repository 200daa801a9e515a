# golden: runtime
# torch's own write form (LRScheduler._update_lr): `for param_group, lr in
# zip(optimizer.param_groups, values)`; measured 2 -> 1 graphs, same output.
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(16, 4)
y = torch.randn(16, 1)


@torch.compile
def train_step():
    opt.step()


def update_lr(optimizer, values):
    # torch's own LRScheduler._update_lr form
    for param_group, lr in zip(optimizer.param_groups, values):
        param_group["lr"] = lr


for i in range(12):
    update_lr(opt, [0.05 / (1 + i)])
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    train_step()
print("final loss", round(loss.item(), 4))
