# CosineAnnealingWarmRestarts stepped outside any compiled region: untouched
import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=5, eta_min=0.001)
loss_fn = torch.compile(torch.nn.functional.mse_loss)

for _ in range(3):
    opt.zero_grad()
    loss_fn(model(torch.randn(2, 4)), torch.zeros(2, 1)).backward()
    opt.step()
    sched.step()
