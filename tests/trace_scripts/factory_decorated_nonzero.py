"""speculators before dbd631b1: the draft model's forward is compiled by the
project's own decorator (`@conditional_torch_compile`, whose body calls
torch.compile), and it builds document ids from per-batch lengths with
`repeat_interleave`, whose output size depends on the data: a graph break,
and the frame resumed after it sees a new total length every batch.  The
setting for this compiled function only, a `torch._dynamo.config.patch(...)`
decorator right above the project's, keeps the op in the graph."""
import torch


def conditional_torch_compile(func):
    # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
    return torch.compile(func, backend="eager")


class Draft(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    @conditional_torch_compile
    def forward(self, hidden, lengths):
        document_ids = torch.repeat_interleave(torch.arange(lengths.shape[0]), lengths)
        hidden = self.proj(hidden[: document_ids.shape[0]])
        return (hidden.sum(-1) * (document_ids + 1)).sum()


torch.manual_seed(0)
model = Draft()
total = 0.0
for lengths in ([3, 5], [2, 4], [7, 2], [4, 6], [1, 2]):  # two documents a batch, a new total length
    total += float(model(torch.randn(32, 4), torch.tensor(lengths)))
print(f"result: {total:.4f}")
