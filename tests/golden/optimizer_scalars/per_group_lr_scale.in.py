# Two param groups without an lr of their own share the constructor's lr
# object: with `lr=torch.tensor(1e-3)` both hold the same tensor, and the
# layer-decay write below (each group its own `lr * g["lr_scale"]`) made
# `.fill_` would give both groups the value written last (measured on 2.13:
# the parameters end elsewhere). Reported, no fix, no change.
import torch

torch.manual_seed(0)
a = torch.nn.Linear(4, 4)
b = torch.nn.Linear(4, 4)
opt = torch.optim.AdamW([{"params": a.parameters(), "lr_scale": 0.5}, {"params": b.parameters(), "lr_scale": 1.0}], lr=1e-3)


@torch.compile
def train_step(x):
    (a(x) + b(x)).sum().backward()
    opt.step()
    opt.zero_grad()


for step in range(6):
    lr = 1e-3 * (0.9 ** step)
    for g in opt.param_groups:
        g["lr"] = lr * g["lr_scale"]
    train_step(torch.randn(2, 4))
print(round(sum(p.sum().item() for p in list(a.parameters()) + list(b.parameters())), 6))
