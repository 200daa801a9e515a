# golden: runtime
# Two param groups share the constructor's lr tensor (nanoGPT's decay and
# no-decay groups); the schedule gives every group the same value, so
# `.fill_` of the one shared tensor is right.
import torch

torch.manual_seed(0)
a = torch.nn.Linear(4, 4)
b = torch.nn.Linear(4, 4)
opt = torch.optim.AdamW([{"params": a.parameters(), "weight_decay": 0.1}, {"params": b.parameters(), "weight_decay": 0.0}], lr=1e-3)


@torch.compile
def train_step(x):
    (a(x) + b(x)).sum().backward()
    opt.step()
    opt.zero_grad()


for step in range(6):
    lr = 1e-3 * (0.9 ** step)
    for g in opt.param_groups:
        g["lr"] = lr
    train_step(torch.randn(2, 4))
print(round(sum(p.sum().item() for p in list(a.parameters()) + list(b.parameters())), 5))
