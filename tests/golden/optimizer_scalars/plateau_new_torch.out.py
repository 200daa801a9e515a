# golden: runtime --target-torch 2.10
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.05))
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, "min", 0.5, patience=0)
x = torch.randn(16, 4)
y = torch.randn(16, 1)


@torch.compile
def train_step():
    opt.step()


for _ in range(12):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    train_step()
    sched.step(1.0)
print("final loss", round(loss.item(), 4))
