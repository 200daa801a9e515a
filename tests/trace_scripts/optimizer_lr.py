"""A compiled optimizer step whose lr a scheduler changes every step."""
import torch

torch.manual_seed(0)
model = torch.nn.Linear(2, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)


@torch.compile(backend="eager")
def opt_step():
    opt.step()


for _ in range(5):
    model(torch.ones(1, 2)).sum().backward()
    opt_step()
    sched.step()
print("result:", round(float(model.weight.sum()), 4))
