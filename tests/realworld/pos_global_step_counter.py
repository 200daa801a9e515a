# realworld: positive fix=unsafe graphs=8 limit
# Pattern: a training script keeps its step counter in a module global that a
# helper advances (`global STEP; STEP += 1`, the shape of nanoGPT-style
# scripts with a global iteration count) and a compiled function reads it for
# its warm-up scale. Dynamo guards the global's value (`G['STEP'] == 3`), so
# every step recompiles. Cure: pass the step as an argument (FR011's unsafe
# fix: `def scaled_update(w, g, *, STEP)`, `STEP=STEP` at the call; measured
# 8 graphs + limit -> 2, same output) or keep it in a tensor updated with
# `.fill_()`.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 steps).
import torch

STEP = 0
WARMUP = 20


def advance():
    global STEP
    STEP += 1


@torch.compile
def scaled_update(w, g):
    return w - 0.1 * min(1.0, (STEP + 1) / WARMUP) * g  # expect: FR011


torch.manual_seed(0)
w, g = torch.randn(8), torch.randn(8)
for _ in range(12):
    w = scaled_update(w, g)
    advance()
print(round(float(w.sum()), 4))
