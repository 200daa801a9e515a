# Blocks compiled one by one take their varying tensors through **kwargs
# (OLMo-core before #504: cu_doc_lens, one more entry per packed document):
# the shape guard names kwargs['cu_doc_lens']; after one change automatic
# dynamic makes the size symbolic.  2 graphs: bounded; maybe_mark_dynamic on
# the tensor passed as cu_doc_lens, before the call, spares even that one.
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x, **kwargs):
        return x + self.lin(x) * kwargs["cu_doc_lens"].float().mean()


torch.manual_seed(0)
blocks = torch.nn.ModuleList(Block() for _ in range(4))
for block in blocks:
    block.compile(backend="eager")
with torch.no_grad():  # every block's input alike but for cu_doc_lens
    for step in range(8):
        doc_lens = torch.randint(10, 200, (2 + step % 5,))
        cu_doc_lens = torch.cat([torch.zeros(1, dtype=torch.long), doc_lens.cumsum(0)])
        h = torch.randn(1, 64, 16)
        for block in blocks:
            h = block(h, cu_doc_lens=cu_doc_lens)
