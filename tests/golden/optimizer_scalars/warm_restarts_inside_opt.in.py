# golden: runtime
# the optimizer step is compiled, CosineAnnealingWarmRestarts steps outside:
# lr becomes a tensor, the scheduler (which rejects a tensor eta_min) is untouched
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=5, eta_min=0.001)
opt.step = torch.compile(opt.step)
x = torch.randn(16, 4)
y = torch.randn(16, 1)

for _ in range(12):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    sched.step()
print("final loss", round(loss.item(), 4))
