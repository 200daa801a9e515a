# golden: runtime
# Issue 15 item 1: a param group with its own lr. Every group's lr becomes a
# tensor (a scheduler, or `group["lr"].fill_(...)`, must meet no float).
import torch

torch.manual_seed(0)
backbone = torch.nn.Linear(4, 4)
head = torch.nn.Linear(4, 1)
opt = torch.optim.Adam([{"params": backbone.parameters(), "lr": 0.005}, {"params": head.parameters()}], lr=0.05)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
x = torch.randn(16, 4)
y = torch.randn(16, 1)


@torch.compile
def train_step():
    opt.step()
    sched.step()


for i in range(12):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(head(backbone(x)), y)
    loss.backward()
    train_step()
print("final loss", round(loss.item(), 4))
