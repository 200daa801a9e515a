# golden: --unsafe-fixes runtime
# Unsafe fix (FR017): a compiled per-parameter update of an Optimizer
# subclass looks the parameter's state up inside (`self.state[p]`) and counts
# a Python int step there (Advanced_Optimizers' Prodigy_adv, PR #6). torch
# resolves the key while tracing: a graph for every parameter and step.
# Measured (torch 2.13 CPU): 8 graphs and the recompile limit over 3 steps of
# 4 parameters of one shape; the entry passed in by the caller (the fix, the
# counter left inside): 3; the project's V2.0 form (state_passed_in.in.py): 1.
import torch


class SignSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, {"lr": lr})
        self._compiled = torch.compile(self._update)

    def _update(self, p: torch.Tensor, group: dict):
        state = self.state[p]
        if "step" not in state:
            state["step"] = 0
            state["buf"] = torch.zeros_like(p)
        state["buf"].mul_(0.9).add_(p.grad)
        p.data.add_(state["buf"].sign(), alpha=-group["lr"])
        state["step"] += 1

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                self._compiled(p, group)


torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(4, 4, bias=False) for _ in range(4)])
opt = SignSGD(model.parameters())
for _ in range(3):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
print(f"OUT {sum(float(p.sum()) for p in model.parameters()):.6f}")
