# golden: runtime --unsafe-fixes
# A module-level loop steps the int global SHIFT that the compiled function
# reads: 8 graphs, then the recompile limit (eager). The unsafe fix passes it
# as a keyword-only argument at the one call: automatic dynamic makes it a
# symbolic int after one change. Measured (torch 2.13 CPU, counting
# backend): 8 graphs + limit -> 2, same output.
import torch

SHIFT = 0


@torch.compile
def shifted(x):
    return x + SHIFT


x = torch.ones(4)
for _ in range(12):
    x = shifted(x)
    SHIFT += 1
print(float(x.sum()))
