"""A functools.partial installed anew as a layer's `forward` at every re-hook
(OneTrainer before 3fced711: fused-qkv adapters taken off and put back on at
every step with a prior prediction): torch guards the compiled block on the
partial's identity, and when the old one is freed the block's compiled code
is thrown away (`Cache line invalidated because ...forward got
deallocated`): one compile per re-hook.  The cure keeps one partial per
index on the group and reuses it."""
import functools

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class Adapter:
    def __init__(self, leaves):
        self.leaves = leaves
        self.scales = [0.5 + i for i in range(len(leaves))]
        self.originals = [leaf.forward for leaf in leaves]

    def _leaf_forward(self, leaf_index, x):
        return self.originals[leaf_index](x) * self.scales[leaf_index]

    def hook(self):
        for leaf_index, leaf in enumerate(self.leaves):
            leaf.forward = functools.partial(self._leaf_forward, leaf_index)

    def unhook(self):
        for leaf, original in zip(self.leaves, self.originals):
            leaf.forward = original


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(4, 4)
        self.k = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.q(x) + self.k(x)


torch.manual_seed(0)
block = Block()
adapter = Adapter([block.q, block.k])
compiled = torch.compile(block, backend=counting_backend)
total = 0.0
with torch.no_grad():
    for step in range(4):
        adapter.hook()
        total += float(compiled(torch.randn(2, 4)).sum())
        adapter.unhook()  # the prior prediction runs without the adapters
        total += float(compiled(torch.randn(2, 4)).sum())
print(f"result: {total:.4f}")
print(f"graphs: {GRAPHS}")
