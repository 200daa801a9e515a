"""Recompiles on Python values: a list's length, a dict's keys, which function
is passed, which type, a closure's contents (an optional argument: none seen)."""
import torch


@torch.compile(backend="eager")
def stack_sum(xs):
    return sum(xs)


@torch.compile(backend="eager")
def by_name(d):
    return sum(d.values())


@torch.compile(backend="eager")
def apply(x, act):
    return act(x)


class Cfg:
    scale = 2.0


class OtherCfg:
    scale = 2.0


@torch.compile(backend="eager")
def scaled(x, cfg):
    return x * cfg.scale


def make(scale):
    def inner(x):
        return x * scale

    return inner


@torch.compile(backend="eager")
def call(fn, x):
    return fn(x)


@torch.compile(backend="eager")
def maybe_bias(x, bias):
    return x if bias is None else x + bias


x = torch.ones(3)
total = 0.0
for n in (1, 2, 3):
    total += float(stack_sum([x] * n).sum())
for keys in ("a", "ab", "abc"):
    total += float(by_name({k: x for k in keys}).sum())
for act in (torch.relu, torch.tanh, torch.sigmoid):
    total += float(apply(x, act).sum())
for cfg in (Cfg(), OtherCfg()):
    total += float(scaled(x, cfg).sum())
for s in (1, 2, 3):
    total += float(call(make(s), x).sum())
for bias in (None, x):
    total += float(maybe_bias(x, bias).sum())
print("result:", round(total, 3))
