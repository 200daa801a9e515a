# ReduceLROnPlateau before torch 2.10 puts a float lr back: reported only
import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, "min", 0.5)


@torch.compile
def train_step():
    opt.step()


def epoch(metric):
    train_step()
    sched.step(metric)
