# FR022 reports it and offers no fix: the file stays unchanged.
# The decorator form: `@torch.compile` on an optimizer's step that counts
# `group["k"] = group.get("k", 0) + 1` in each param group (timm's LAMB
# before 29993ffc counted `group['step']`; tests/realworld/pos_param_group_step_int.py
# is the measured program).
import torch


class SignSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2):
        super().__init__(params, dict(lr=lr))

    @torch.compile
    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            group["k"] = group.get("k", 0) + 1
            for p in group["params"]:
                p.add_(p.grad.sign(), alpha=-group["lr"] / group["k"])
