"""Demo for FR004 (optimizer-scalars): an optimizer and its scheduler stepped
inside a compiled training step.

The float ``lr`` is a constant guarded by value inside the compiled step; the
scheduler changes it every step, so torch recompiles.
``fix-recompiles check examples/optimizer_scalars_demo.py --fix`` turns
``lr=LR`` into ``lr=torch.tensor(LR)`` and ``gamma=0.95`` into
``gamma=torch.tensor(0.95)``: the schedulers then update the tensor in place
and one graph serves every lr (torch 2.13: 3 graphs before, 2 after for this
file; run it with ``TORCH_LOGS=recompiles`` to see the lr guard fail).
The warm-restarts scheduler of the second optimizer steps outside the
compiled region and rejects a tensor ``eta_min``: it is left alone.
"""

import torch

LR = 3e-2


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.95)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)

    @torch.compile
    def train_step():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss

    for step in range(12):
        loss = train_step()
    print("final loss", round(loss.item(), 4))

    probe = torch.nn.Linear(8, 1)
    probe_opt = torch.optim.SGD(probe.parameters(), lr=0.1)
    restarts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(probe_opt, T_0=4, eta_min=0.001)
    for step in range(4):
        probe_opt.zero_grad()
        torch.nn.functional.mse_loss(probe(x), y).backward()
        probe_opt.step()
        restarts.step()


if __name__ == "__main__":
    main()
