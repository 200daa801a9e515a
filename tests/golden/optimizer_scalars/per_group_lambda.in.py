# Two param groups without an lr of their own share the constructor's lr
# object, and LambdaLR gives each its own factor: torch's scheduler writes a
# tensor lr in place, so with `lr=torch.tensor(0.1)` both groups would get
# the factor of the second (measured on 2.13: [0.05, 0.05] instead of
# [0.1, 0.05]). Reported, no fix, no change.
import torch

torch.manual_seed(0)
a = torch.nn.Linear(4, 4)
b = torch.nn.Linear(4, 4)
opt = torch.optim.SGD([{"params": a.parameters()}, {"params": b.parameters()}], lr=0.1)
sched = torch.optim.lr_scheduler.LambdaLR(opt, [lambda e: 0.9 ** e, lambda e: 0.5 * 0.9 ** e])


@torch.compile
def train_step(x):
    (a(x) + b(x)).sum().backward()
    opt.step()
    sched.step()
    opt.zero_grad()


for step in range(6):
    train_step(torch.randn(2, 4))
print(round(sum(p.sum().item() for p in list(a.parameters()) + list(b.parameters())), 6))
