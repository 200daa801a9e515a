# without --unsafe-fixes: reported (the fix must drop foreach=True), unchanged
import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01, foreach=True)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)


@torch.compile
def train_step():
    opt.step()
    sched.step()
