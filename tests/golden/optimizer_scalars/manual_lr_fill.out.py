# golden: runtime
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=torch.tensor(0.001))
x = torch.randn(16, 4)
y = torch.randn(16, 1)


@torch.compile
def train_step():
    opt.step()


for i in range(12):
    for group in opt.param_groups:
        group["lr"].fill_(0.05 / (1 + i))
    opt.param_groups[0]["lr"].fill_(0.05 / (1 + i))
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    train_step()
print("final loss", round(loss.item(), 4))
