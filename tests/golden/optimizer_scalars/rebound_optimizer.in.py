# The optimizer's name bound to two constructions (a linear probe, then
# fine-tuning with lr=args.finetune_lr): the write reaches both, and the
# second keeps a float lr a `.fill_` would crash on (found by an audit).
# Which construction a use reaches is not followed: no finding.
import torch
import torch.nn as nn

torch.manual_seed(0)
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--finetune-lr", type=float, default=1e-4)
parser.add_argument("--warmup", type=int, default=3)
args = parser.parse_args()
backbone = nn.Linear(4, 8)
head = nn.Linear(8, 2)
model = nn.Sequential(backbone, nn.ReLU(), head)
optimizer = torch.optim.AdamW(head.parameters(), lr=1e-3)


@torch.compile(backend="eager")
def train_step(x, y):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def run_phase(name, steps, peak_lr):
    for step in range(steps):
        lr = peak_lr * min(1.0, (step + 1) / args.warmup)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = train_step(x, y)
        print(f"{name} step {step}: loss {loss.item():.6f}")


x = torch.randn(16, 4)
y = torch.randn(16, 2)
run_phase("linear-probe", 4, 1e-3)
# phase 2: unfreeze the backbone and fine-tune everything
optimizer = torch.optim.AdamW(model.parameters(), lr=args.finetune_lr)
run_phase("finetune", 4, args.finetune_lr)
