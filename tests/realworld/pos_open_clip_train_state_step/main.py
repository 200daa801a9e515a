# realworld: positive fix=unsafe graphs=3
# Pattern: mlfoundations/open_clip before 3650e7b / 0b07760, its real tree
# trimmed: `main.py` builds the AdamW (lr from args), the schedule
# (`scheduler.cosine_lr`, verbatim) and `TrainState(optimizer=...)`;
# `train.py`'s `train_one_epoch(state)` compiles
# `_make_train_step_no_accum_no_scaler(state.task, state.optimizer, ...)`,
# whose returned closure steps the optimizer (`--torchcompile-strategy
# step`).  Every new lr the schedule writes recompiles the step.  FR004
# follows the optimizer through the dataclass field into the other module's
# compiled closure and the schedule's closure into `assign_learning_rate`;
# the lr comes from `args.lr`, so the constructor's half of the cure
# (`torch.tensor(float(args.lr))`) is unsafe, and so is the helper's half
# (its write made `.fill_`, the project's 3650e7b), which holds only with
# it: both are applied with --unsafe-fixes, neither without.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 3
# graphs over 2 epochs of 5 steps.
import argparse

import torch
from torch import optim

from scheduler import cosine_lr, const_lr
from train import TrainState, train_one_epoch


def main(args):
    torch.manual_seed(0)
    task = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 1))
    data = {"train": [torch.randn(16, 8) for _ in range(5)]}

    optimizer = None
    if args.train_data:
        # If some params are not passed, we use the default values based on model name.
        exclude = lambda n, p: p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or 'logit_scale' in n
        include = lambda n, p: not exclude(n, p)

        named_parameters = list(task.named_parameters())
        gain_or_bias_params = [p for n, p in named_parameters if exclude(n, p) and p.requires_grad]
        rest_params = [p for n, p in named_parameters if include(n, p) and p.requires_grad]

        optimizer = optim.AdamW(
            [
                {"params": gain_or_bias_params, "weight_decay": 0.},
                {"params": rest_params, "weight_decay": args.wd},
            ],
            lr=args.lr,  # expect: FR004
            betas=(args.beta1, args.beta2),
            eps=args.eps,
        )

    # create scheduler if train
    scheduler = None
    if 'train' in data and optimizer is not None:
        total_steps = len(data["train"]) * args.epochs
        if args.lr_scheduler == "cosine":
            scheduler = cosine_lr(optimizer, args.lr, args.warmup, total_steps)
        elif args.lr_scheduler == "const":
            scheduler = const_lr(optimizer, args.lr, args.warmup, total_steps)

    train_state = TrainState(
        task=task,
        optimizer=optimizer,
        scheduler=scheduler,
        epoch=0,
    )
    for epoch in range(train_state.epoch, args.epochs):
        train_state.epoch = epoch
        train_one_epoch(train_state, data, args)
    print(round(sum(p.sum().item() for p in task.parameters()), 5))


if __name__ == "__main__":
    main(argparse.Namespace(
        train_data="synthetic", lr=5e-4, wd=0.2, beta1=0.9, beta2=0.98, eps=1e-6, epochs=2, warmup=3,
        lr_scheduler="cosine", torchcompile=True, torchcompile_strategy="step", skip_scheduler=False,
    ))
