# CyclicLR with cycle_momentum=True (default) rewrites momentum floats: reported only
import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
sched = torch.optim.lr_scheduler.CyclicLR(opt, base_lr=0.001, max_lr=0.1)


@torch.compile
def train_step():
    opt.step()
    sched.step()
