# realworld: positive fix=safe graphs=3
# Pattern: a project's own LR scheduler, in another module, that writes the lr
# under a computed key (`group[self.lr_field] = new_lr`; torchtune's and
# litgpt's recipes and many trainers ship their own warm-up schedulers instead
# of torch.optim.lr_scheduler), while the torch.optim optimizer is stepped
# inside a compiled function. Making the constructor's lr a 0-d tensor is not
# enough: the scheduler replaces it by a float again; its write must become
# `group[self.lr_field].fill_(new_lr)` too.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 3
# graphs over 12 steps; hand-fixed in both files (`lr=torch.tensor(0.1)` and
# `.fill_(new_lr)`): 2, same output; the constructor alone: still 3.
import torch

from scheduler import WarmupScheduler

torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
opt = torch.optim.Adam(model.parameters(), lr=0.1)  # expect: FR004
sched = WarmupScheduler(opt, base_lr=0.1, warmup=8)


@torch.compile(backend="eager")
def train_step(x):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


x = torch.randn(8, 4)
for step in range(12):
    train_step(x)
    sched.step()
print(round(model.weight.sum().item(), 4))
