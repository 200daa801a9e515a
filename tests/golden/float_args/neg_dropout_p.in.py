# An annealed dropout probability passed to a compiled function that ends in
# `F.dropout(p=...)`: the op needs a Python number (a 0-d tensor p is a graph
# break, tests/test_tensor_ops_table.py), so the finding has no fix: unchanged.
import torch
import torch.nn.functional as F


@torch.compile
def block(x, p):
    return F.dropout(torch.relu(x), p=p, training=True)


x = torch.randn(4, 8)
for step in range(12):
    block(x, 0.5 * (1 - step / 12))
