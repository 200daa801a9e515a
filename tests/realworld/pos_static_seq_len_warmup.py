# realworld: positive fix=safe graphs=8 limit
# Pattern: sequence-length warm-up (mosaicml/composer's SeqLengthWarmup
# algorithm truncates every batch to a length that grows during training;
# curriculum training in general) into a model compiled with `dynamic=False`:
# the input width really changes, so every new length recompiles and after 8
# the model silently runs eager. Removing `dynamic=False` cures it. Not in the
# seven pinned repos (their shapes are fixed; see the negatives).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (10 lengths); hand-fixed (`dynamic=False`
# removed): 2 graphs, same output.
import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab=32, dim=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        return self.head(torch.cumsum(self.emb(idx), dim=1))


torch.manual_seed(0)
model = TinyLM()
model = torch.compile(model, dynamic=False, backend="eager")  # expect: FR001
data = torch.randint(0, 32, (2, 256))
losses = []
with torch.no_grad():
    for step in range(20):  # allow: FR006 (10 lengths > limit 8: raising the limit is a real, if worse, cure)
        seq_len = 16 * (1 + step // 2)
        idx = data[:, :seq_len]
        logits = model(idx)
        losses.append(round(logits.float().mean().item(), 4))
print(losses[-1], len(losses))
