# golden: runtime
# A helper writes the lr into groups it is given (`warm(opt.param_groups, v)`,
# DeepSpeed's `update_lr(param_groups, lrs)` form): followed to `opt`, both
# writes become `.fill_`.
import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)


@torch.compile(backend="eager")
def train_step():
    opt.step()


def warm(groups, v):
    for g in groups:
        g["lr"] = v


for i in range(6):
    for group in opt.param_groups:
        group["lr"] = 0.05 / (1 + i)
    if i == 0:
        warm(opt.param_groups, 0.01)
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    train_step()
print("ok")
