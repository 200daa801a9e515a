# golden: runtime
import torch


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 1)
        self.opt = torch.optim.Adagrad(self.model.parameters(), lr=torch.tensor(0.1))
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=12, eta_min=torch.tensor(0.001))
        self.step = torch.compile(self._step)

    def _apply(self):
        self.opt.step()
        self.sched.step()

    def _step(self):
        self._apply()


t = Trainer()
x = torch.randn(16, 4)
y = torch.randn(16, 1)
for _ in range(12):
    t.opt.zero_grad()
    loss = torch.nn.functional.mse_loss(t.model(x), y)
    loss.backward()
    t.step()
print("final loss", round(loss.item(), 4))
