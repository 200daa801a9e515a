from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch


@dataclass
class TrainState:
    """Runtime training state.

    ``compiled_train_step`` is runtime-only and is not saved.
    """
    task: Any
    optimizer: Optional[torch.optim.Optimizer] = None
    scaler: Optional[Any] = None
    scheduler: Optional[Callable[[int], None]] = None
    epoch: int = 0
    global_step: int = 0
    samples_seen: int = 0
    compiled_train_step: Optional[Callable] = None


def _torch_compile_kwargs(args):
    kwargs = {}
    backend = getattr(args, "torchcompile_backend", None)
    mode = getattr(args, "torchcompile_mode", None)
    if backend is not None:
        kwargs["backend"] = backend
    if mode is not None:
        kwargs["mode"] = mode
    return kwargs


def _make_train_step_no_accum_no_scaler(task, optimizer, autocast, args):
    grad_clip_norm = getattr(args, "grad_clip_norm", None)
    # Parameters are snapshotted when the step is created/compiled. Do not swap
    # or re-wrap task.trainable_module after this point.
    clip_params = tuple(task.parameters()) if grad_clip_norm is not None else ()

    def train_step(batch):
        optimizer.zero_grad()
        with autocast():
            total_loss = task(batch).pow(2).mean()
        total_loss.backward()
        if grad_clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(clip_params, grad_clip_norm, norm_type=2.0)
        optimizer.step()
        return total_loss

    return train_step


def _get_compiled_train_step(state: TrainState, autocast, args):
    assert state.optimizer is not None, "_get_compiled_train_step requires state.optimizer."
    if state.compiled_train_step is not None:
        return state.compiled_train_step

    compiled_train_step = torch.compile(
        _make_train_step_no_accum_no_scaler(state.task, state.optimizer, autocast, args),
        **_torch_compile_kwargs(args),
    )
    state.compiled_train_step = compiled_train_step
    return state.compiled_train_step


def train_one_epoch(state: TrainState, data, args, tb_writer=None):
    task = state.task
    optimizer = state.optimizer
    scheduler = state.scheduler
    epoch = state.epoch
    assert optimizer is not None, "train_one_epoch requires state.optimizer."

    autocast = torch.autocast if False else (lambda: torch.autocast("cpu", enabled=False))
    compile_step = (
        getattr(args, "torchcompile", False)
        and getattr(args, "torchcompile_strategy", "task") == "step"
    )
    if compile_step:
        train_step = _get_compiled_train_step(state, autocast, args)
    else:
        train_step = _make_train_step_no_accum_no_scaler(task, optimizer, autocast, args)

    num_batches_per_epoch = len(data["train"])
    for i, batch in enumerate(data["train"]):
        step = num_batches_per_epoch * epoch + i
        if not args.skip_scheduler:
            scheduler(step)
        train_step(batch)
        state.global_step += 1
