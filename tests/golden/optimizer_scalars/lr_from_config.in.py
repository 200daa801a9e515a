# lr comes from a config file: an unsafe fix (`torch.tensor(float(cfg["lr"]))`), so plain --fix leaves it
import json

import torch

with open("config.json") as fh:
    cfg = json.load(fh)

model = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)


@torch.compile
def train_step():
    opt.step()
    sched.step()
