# A marker in a function compiled with fullgraph=True: graph_break() there
# makes dynamo raise on the first call (found by an audit). Report only.
import torch

torch.manual_seed(0)
w = torch.randn(16, 16)


@torch.compile(fullgraph=True, dynamic=False, backend="eager")
def block(x, scale):
    h = torch.tanh(x @ w)
    # fix-recompiles: graph-break
    return h * scale


x = torch.randn(4, 16)
for i in range(3):
    print(i, block(x, i).sum().item())
