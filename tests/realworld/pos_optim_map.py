# realworld: positive fix=safe graphs=4
# Pattern: pytorch/torchtitan (torchtitan/components/optimizer/optimizer.py at
# b5bcd76c66d0acb1a08b176d9639425bc55e0b2a: `optimizer_factories = {"Adam":
# torch.optim.Adam, "AdamW": torch.optim.AdamW, ...}[name]`): the optimizer
# class comes out of a dict, and is stepped inside a compiled function while a
# scheduler changes its float lr.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 4
# graphs over 12 steps; hand-fixed (`lr=torch.tensor(0.05)`): 3, same output.
import torch

OPTIMIZERS = {
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
}

torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
opt = OPTIMIZERS["sgd"](model.parameters(), lr=0.05, momentum=0.9)  # expect: FR004
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)


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
