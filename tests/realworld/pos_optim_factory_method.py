# realworld: positive fix=safe graphs=2
# Pattern: Lightning-AI/litgpt (litgpt/utils.py at
# 26857050fe3ff627cd714fe92f5838f51a3d5efa: `instantiate_torch_optimizer`
# resolves the class, then calls it) and trainers whose method returns the
# optimizer class (`self.optimizer()(params, lr=...)`): the optimizer is built
# through a method and stepped inside a compiled function while a scheduler
# changes its float lr.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 12 steps; hand-fixed (`lr=torch.tensor(0.01)`): 1, same output.
import torch


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 4)
        self.opt = self.optimizer()(self.model.parameters(), lr=0.01)  # expect: FR004
        self.sched = torch.optim.lr_scheduler.ExponentialLR(self.opt, gamma=0.8)

    def optimizer(self):
        return torch.optim.Adam


trainer = Trainer()


@torch.compile(backend="eager")
def opt_step():
    trainer.opt.step()


x = torch.randn(8, 4)
for step in range(12):
    trainer.model(x).pow(2).mean().backward()
    opt_step()
    trainer.opt.zero_grad()
    trainer.sched.step()
print(round(trainer.model.weight.sum().item(), 4))
