"""ai-toolkit's captioner (before its static-shape fix), cut down: the decode
step is compiled with `dynamic=False` and fed batches whose sizes change one
after another: the prompt length first (3 videos of 5, then 7 tokens), then
the batch (a last bucket of 2): 4 graphs.  Removing `dynamic=False` (FR001)
leaves 3: automatic dynamic makes the length dynamic at its first change and
the batch only at the next, a graph each.  `dynamic=True` compiles 1, and
`run --fix` keeps it in place of the removal: the same captions."""
import torch
from torch import nn


class Captioner(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        return self.proj(self.embed(input_ids).mean(1))


torch.manual_seed(0)
model = Captioner(32, 8)
# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
step = torch.compile(model, backend="eager", dynamic=False)

total = 0
with torch.no_grad():
    for batch, length in ((3, 5), (3, 7), (2, 9), (2, 4)):
        prompt = torch.randint(0, 32, (batch, length))
        total += int(step(prompt).argmax(-1).sum())
print(f"result: {total}")
