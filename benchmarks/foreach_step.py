"""Issue 12: does dropping Adam/AdamW's ``foreach=True`` (FR004's fix for a
tensor lr) slow the *compiled* optimizer step under the default inductor
backend on CPU?

    python benchmarks/foreach_step.py [--rounds N] [--sizes 8x256,8x1024] [--optimizers Adam,AdamW]

For each model size (``L x W``: ``L`` Linear(W, W) layers) and each optimizer
(Adam, AdamW), it builds three variants and times ``torch.compile(step)``
(default backend: inductor) after warm-up, the variants interleaved (one
step of each per round, the order rotated) so that load from other processes
hits all of them alike; median and minimum per variant:

* ``foreach=True``,  ``lr=0.01`` (float): what the user wrote;
* ``foreach=None``,  ``lr=torch.tensor(0.01)``: FR004's fix (``foreach=True``
  removed, the lr a 0-d tensor);
* ``foreach=False``, ``lr=torch.tensor(0.01)``: the single-tensor path forced.

``foreach=True`` with a tensor lr raises without ``capturable=True``, so it is
not a variant.  Each variant starts from the same weights and gradients; the
script also checks that the parameters after the timed steps agree across
variants (max abs difference printed).  Prints one line per (size, optimizer,
variant): compile seconds, median and minimum ms per step, and their ratio to
the user's ``foreach=True``.  Only times on this machine: run it where you decide.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
import torch._dynamo


def build(layers: int, width: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])


def variant(name: str, opt_cls, layers: int, width: int):
    """(model, compiled step, compile seconds) for one variant."""
    model = build(layers, width)
    torch.manual_seed(1)
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-2
    if name == "foreach=True, float lr":
        opt = opt_cls(model.parameters(), lr=0.01, foreach=True)
    elif name == "foreach=None, tensor lr":
        opt = opt_cls(model.parameters(), lr=torch.tensor(0.01))
    else:
        opt = opt_cls(model.parameters(), lr=torch.tensor(0.01), foreach=False)

    @torch.compile
    def step():
        opt.step()

    t0 = time.perf_counter()
    step()  # compile
    compile_s = time.perf_counter() - t0
    for _ in range(3):
        step()
    return model, step, compile_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--sizes", default="8x256,8x1024")
    ap.add_argument("--optimizers", default="Adam,AdamW")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, backend inductor (default), CPU")
    print("variants are timed interleaved (one step of each per round, order rotated), so load from other processes hits all alike")
    names = ("foreach=True, float lr", "foreach=None, tensor lr", "foreach=False, tensor lr")
    for size in args.sizes.split(","):
        layers, width = (int(v) for v in size.split("x"))
        n = sum(p.numel() for p in build(layers, width).parameters())
        for opt_name in args.optimizers.split(","):
            cls = getattr(torch.optim, opt_name)
            torch._dynamo.reset()
            built = {name: variant(name, cls, layers, width) for name in names}
            times = {name: [] for name in names}
            for r in range(args.rounds):
                order = names[r % 3 :] + names[: r % 3]
                for name in order:
                    step = built[name][1]
                    t0 = time.perf_counter()
                    step()
                    times[name].append((time.perf_counter() - t0) * 1e3)
            ref_params = torch.cat([p.detach().flatten() for p in built[names[0]][0].parameters()])
            base_med = statistics.median(times[names[0]])
            base_min = min(times[names[0]])
            for name in names:
                model, _, compile_s = built[name]
                params = torch.cat([p.detach().flatten() for p in model.parameters()])
                med, best = statistics.median(times[name]), min(times[name])
                diff = (params - ref_params).abs().max().item()
                print(
                    f"{size:>8} ({n:>8} params) {opt_name:<6} {name:<26} compile {compile_s:6.1f} s  "
                    f"step median {med:8.3f} ms (x{med / base_med:4.2f})  min {best:8.3f} ms (x{best / base_min:4.2f})  max|dparam| {diff:.2e}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
