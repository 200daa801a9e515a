# golden: runtime
# Safe fix (FR017): Prodigy_adv's flow (Advanced_Optimizers PR #6), a
# name-mangled per-parameter update compiled by the optimizer's own
# `compile()` into a name-mangled attribute (no subclass can bind another
# callable there), returning early for a parameter without a gradient before
# it looks the state up. The caller passes the entry in, looked up only where the
# function would reach its lookup (`None if p.grad is None else ...`): a frozen
# parameter gains no state entry, as before (STATE prints the count).
# Measured (torch 2.13 CPU, tests/runtime_probe.py): 4 graphs over 3 steps of
# 5 parameters of one shape, the last one frozen; the fix: 1, the same values
# and 4 state entries. (Frozen first, the first call traces an empty frame and
# torch runs the update eagerly from then on: no graph either way.)
import torch


class SignSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, {"lr": lr})
        self.__compiled_update = None

    def __update(self, p: torch.Tensor, group: dict):
        if p.grad is None:
            return
        grad = p.grad
        state = self.state[p]
        if "step" not in state:
            state["step"] = 0
            state["buf"] = torch.zeros_like(p)
        state["buf"].mul_(0.9).add_(grad)
        p.data.add_(state["buf"].sign(), alpha=-group["lr"])
        state["step"] += 1

    def compile(self):
        self.__compiled_update = torch.compile(self.__update)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if self.__compiled_update is None:
                    self.__update(p, group)
                else:
                    self.__compiled_update(p, group)


torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(4, 4, bias=False) for _ in range(5)])
model[4].weight.requires_grad_(False)
opt = SignSGD(model.parameters())
opt.compile()
for _ in range(3):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
print(f"OUT {sum(float(p.sum()) for p in model.parameters()):.6f}")
print("STATE", len(opt.state))
