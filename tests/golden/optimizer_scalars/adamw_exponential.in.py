# golden: runtime
import torch

LR = 3e-2

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01, eps=1e-8)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.95)
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
