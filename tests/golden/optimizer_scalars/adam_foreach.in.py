# golden: runtime --unsafe-fixes
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01, foreach=True)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
x = torch.randn(16, 4)
y = torch.randn(16, 1)


@torch.compile
def train_step():
    opt.step()
    sched.step()


for _ in range(12):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    train_step()
print("final loss", round(loss.item(), 4))
