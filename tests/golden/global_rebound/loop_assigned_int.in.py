# golden: runtime --unsafe-fixes
# A module-level loop steps the int global SHIFT that the compiled function
# reads; dynamo guards its value (`G['SHIFT'] == 3`). Measured (torch 2.13
# CPU, counting backend, 12 values): 8 graphs, then the recompile limit
# (eager). The unsafe fix passes it as a keyword-only argument at the one
# call: automatic dynamic makes it a symbolic int after one change (2 graphs,
# same output). Without --unsafe-fixes the file stays unchanged.
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
