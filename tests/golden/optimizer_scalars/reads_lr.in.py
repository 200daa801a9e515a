# the module reads the lr back as a number: the fix is unsafe, --fix leaves it
import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)


@torch.compile
def train_step():
    opt.step()
    sched.step()


def log():
    print("lr", round(sched.get_last_lr()[0], 6))
