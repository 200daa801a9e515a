# realworld: negative graphs=1
# Pattern: KellerJordan/modded-nanogpt (records/track_2_medium, Muon):
# `zeropower_via_newtonschulz5(G, steps)` is compiled and loops
# `for _ in range(steps)`; the optimizer passes `ns_steps = group['ns_steps']`
# read per param group, the same 5 every time: no recompile.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1 graph.
import torch


@torch.compile
def zeropower_via_newtonschulz5(G, steps):
    X = G / (G.norm() + 1e-7)
    for _ in range(steps):
        A = X @ X.T
        X = 1.5 * X - 0.5 * A @ X
    return X


torch.manual_seed(0)
param_groups = [dict(params=[torch.randn(8, 8) for _ in range(3)], ns_steps=5)]
total = 0.0
for step in range(4):
    for group in param_groups:
        ns_steps = group["ns_steps"]
        for p in group["params"]:
            total += float(zeropower_via_newtonschulz5(p, steps=ns_steps).sum())
print(round(total, 3))
