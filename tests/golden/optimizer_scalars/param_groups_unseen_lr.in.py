# A param group's own lr computed from a value not visible as a constant
# (`base_lr * 0.1`, issue 15 item 1): wrapping only the constructor's lr and
# writing `group["lr"].fill_(...)` would crash on that group's float. Reported,
# no fix, no change.
import torch

base_lr = float(torch.tensor(0.05).item())
backbone = torch.nn.Linear(4, 4)
head = torch.nn.Linear(4, 1)
opt = torch.optim.SGD([{"params": backbone.parameters(), "lr": base_lr * 0.1}, {"params": head.parameters()}], lr=base_lr, momentum=0.9)


@torch.compile
def train_step():
    opt.step()


for i in range(3):
    for group in opt.param_groups:
        group["lr"] = base_lr / (1 + i)
    train_step()
