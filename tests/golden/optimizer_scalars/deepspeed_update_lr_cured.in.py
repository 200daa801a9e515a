# DeepSpeed's own cure (407708cdb): update_lr keeps a tensor lr a tensor
# (`if is_tensor(param_group['lr']): lr = tensor([lr], ...)`). No finding.
# Reproduction of deepspeedai/DeepSpeed lr_schedules AFTER 407708cdb ("add support for tensor learning
# rate (vs scalar)", #7633): the optimizer is torch.compiled and was built with a tensor lr, but the
# WarmupLR scheduler's `update_lr` writes Python floats into the param groups.
# (deepspeed/runtime/lr_schedules.py at 407708cdb^: update_lr, get_torch_optimizer, WarmupLR verbatim
# but docstrings; engine step order from deepspeed/runtime/engine.py `_take_model_step`, trimmed.)
import argparse
import logging
import math

import torch
from torch.optim import Optimizer
from torch import tensor, is_tensor

logger = logging.getLogger("deepspeed")

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


WARMUP_LOG_RATE = 'log'
WARMUP_LINEAR_RATE = 'linear'


def update_lr(param_groups, lrs):
    for param_group, lr in zip(param_groups, lrs):
        # new LR should match the type of current LR for scalar and Tensor LR support
        if is_tensor(param_group['lr']):
            lr = tensor([lr], device=param_group['lr'].device)
        param_group['lr'] = lr
    return [group['lr'] for group in param_groups]


def get_torch_optimizer(optimizer):
    if isinstance(optimizer, Optimizer):
        return optimizer

    if hasattr(optimizer, 'optimizer') and isinstance(optimizer.optimizer, Optimizer):
        return optimizer.optimizer

    raise TypeError('{} is not a subclass of torch.optim.Optimizer'.format(type(optimizer).__name__))


class WarmupLR(object):

    def __init__(self,
                 optimizer: Optimizer,
                 warmup_min_lr: float = 0.0,
                 warmup_max_lr: float = None,
                 warmup_num_steps: int = 1000,
                 warmup_type: str = WARMUP_LOG_RATE,
                 last_batch_iteration: int = -1):

        self.optimizer = get_torch_optimizer(optimizer)

        if warmup_max_lr is None:
            warmup_max_lr = [group['lr'] for group in self.optimizer.param_groups][0]

        self.min_lrs = self._format_param(self.optimizer, warmup_min_lr, "min_lr")
        self.max_lrs = self._format_param(self.optimizer, warmup_max_lr, "max_lr")
        self.delta_lrs = [big - small for big, small in zip(self.max_lrs, self.min_lrs)]
        self.warmup_num_steps = max(2, warmup_num_steps)
        # Currently only support linear and log function
        if warmup_type not in {WARMUP_LOG_RATE, WARMUP_LINEAR_RATE}:
            logger.warning(f"Using unknown warmup_type: {warmup_type}. The increasing function "
                           f"is set to default (log)")
            warmup_type = WARMUP_LOG_RATE
        self.warmup_type = warmup_type
        self.inverse_log_warm_up = 1.0 / math.log(self.warmup_num_steps)
        self.last_batch_iteration = last_batch_iteration
        # Initialize lr in optimizer
        if last_batch_iteration == -1:
            self._last_lr = update_lr(self.optimizer.param_groups, self.get_lr())

    def get_lr(self):
        if self.last_batch_iteration < 0:
            logger.warning("Attempting to get learning rate from scheduler before it has started")
            return self.min_lrs
        gamma = self._get_gamma()
        return [min_lr + (delta_lr * gamma) for min_lr, delta_lr in zip(self.min_lrs, self.delta_lrs)]

    def get_last_lr(self):
        assert getattr(self, '_last_lr', None) is not None, "need to call step() first"
        return self._last_lr

    def step(self, last_batch_iteration=None):
        if last_batch_iteration is None:
            last_batch_iteration = self.last_batch_iteration + 1
        self.last_batch_iteration = last_batch_iteration
        self._last_lr = update_lr(self.optimizer.param_groups, self.get_lr())

    def state_dict(self):
        return {'last_batch_iteration': self.last_batch_iteration}

    def load_state_dict(self, sd):
        self.last_batch_iteration = sd['last_batch_iteration']

    def _get_gamma(self):
        if self.last_batch_iteration < self.warmup_num_steps:
            if self.warmup_type == WARMUP_LOG_RATE:
                return self.inverse_log_warm_up * math.log(self.last_batch_iteration + 1)
            elif self.warmup_type == WARMUP_LINEAR_RATE:
                return self.last_batch_iteration / self.warmup_num_steps
        return 1.0

    def _format_param(self, optimizer, param_value, param_name):
        if isinstance(param_value, list) or isinstance(param_value, tuple):
            if len(param_value) != len(optimizer.param_groups):
                raise ValueError("expected {} value for {}, got {}".format(len(optimizer.param_groups), param_name,
                                                                           FileNotFoundError(param_value)))
            return list(param_value)
        return [param_value] * len(optimizer.param_groups)


class DeepSpeedEngine:  # stand-in: the fp32, no-ZeRO, no-clipping path of engine.py
    def __init__(self, model, optimizer, lr_scheduler):
        self.module = model
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler

    def forward(self, *inputs):
        return self.module(*inputs)

    def backward(self, loss):
        loss.backward()

    def zero_grad(self):
        for p in self.module.parameters():
            p.grad = None

    def _take_model_step(self, lr_kwargs):
        self.optimizer.step()
        self.zero_grad()
        if self.lr_scheduler is not None:
            self.lr_scheduler.step(**(lr_kwargs or {}))

    def step(self, lr_kwargs=None):
        self._take_model_step(lr_kwargs)


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    # tensor lr, so that the compiled optimizer does not recompile when the lr changes
    optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-2), weight_decay=0.01)
    optimizer.step = torch.compile(optimizer.step, backend=counting_backend)
    scheduler = WarmupLR(optimizer, warmup_min_lr=0.0, warmup_max_lr=1e-2, warmup_num_steps=6,
                         warmup_type=WARMUP_LINEAR_RATE)
    engine = DeepSpeedEngine(model, optimizer, scheduler)

    x = torch.randn(32, 8)
    y = torch.randn(32, 1)
    total = 0.0
    for _ in range(10):
        loss = torch.nn.functional.mse_loss(engine.forward(x), y)
        engine.backward(loss)
        engine.step()
        total += float(loss.detach())
    total += float(sum(p.sum() for p in model.parameters()))
    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {round(total, 4)}")


if __name__ == "__main__":
    main()
