"""A per-parameter optimizer update compiled by the optimizer, its state made
lazily inside: torch guards the length and truth of `self.state` (FR017)."""
import torch


class SignSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, {"lr": lr})
        self.__compiled_update = torch.compile(self.__update, backend="eager")

    def __update(self, p: torch.Tensor, group: dict):
        if p.grad is None:
            return
        state = self.state[p]
        if len(state) == 0:
            state["buf"] = torch.zeros_like(p)
        state["buf"].mul_(0.9).add_(p.grad)
        p.data.add_(state["buf"].sign(), alpha=-group["lr"])

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.__compiled_update(p, group)


torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(4, 4, bias=False) for _ in range(5)])
opt = SignSGD(model.parameters())
for _ in range(3):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
print("result:", round(sum(float(p.detach().sum()) for p in model.parameters()), 5), len(opt.state))
