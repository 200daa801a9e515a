# realworld: negative graphs=2
# Twin of pos_param_group_step_int.py after timm's fix (29993ffc): the step
# count is a 0-d tensor counted in place, so the compiled `optimizer.step`
# guards its dtype and shape, not its value. Measured (torch 2.13.0 CPU,
# tests/runtime_probe.py counting backend): 2 graphs over 6 steps (the empty
# state's first step only). No finding.
import torch
from torch.optim import Optimizer


class Lamb(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            if "step" not in group:
                group["step"] = torch.tensor(0.0)
            group["step"].add_(1)
            step = group["step"]
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = (exp_avg_sq.sqrt() / bias_correction2.sqrt()).add_(group["eps"])
                p.add_(exp_avg / bias_correction1 / denom, alpha=-group["lr"])


def train(steps=6):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    optimizer = Lamb(model.parameters())
    compiled_step = torch.compile(optimizer.step)
    for _ in range(steps):
        model(torch.randn(16, 8)).sum().backward()
        compiled_step()
        optimizer.zero_grad(set_to_none=False)
    return sum(p.sum().item() for p in model.parameters())


print(round(train(), 4))
