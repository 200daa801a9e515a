"""A compiled model is called with a dict of inputs (`model(**inputs)`, as
transformers' decode step calls `model_forward(**model_inputs)`) whose
`attention_mask` entry is optional: the parameter defaults to None and the
builder sets it only when there is a mask.  Each new sequence length
recompiles once (2 graphs).  `inputs["input_ids"]` is marked as it is;
`inputs["attention_mask"]` only under `if isinstance(inputs.get(...),
torch.Tensor):` (absent, or None, a plain mark would raise): 1 graph."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, input_ids, attention_mask=None):
        h = self.proj(self.embed(input_ids))
        if attention_mask is not None:
            h = h * attention_mask.unsqueeze(-1)
        return h.sum(dim=1)


def prepare_inputs(input_ids, attention_mask=None):
    model_inputs = {"input_ids": input_ids}
    if attention_mask is not None:
        model_inputs["attention_mask"] = attention_mask
    return model_inputs


torch.manual_seed(0)
model = Model(32, 8)
# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
compiled = torch.compile(model, backend="eager")
total = 0.0
with torch.no_grad():
    for seq_len in (5, 7, 6, 9):
        input_ids = torch.randint(0, 32, (2, seq_len))
        model_inputs = prepare_inputs(input_ids, torch.ones(2, seq_len))
        total += float(compiled(**model_inputs).sum())
print(f"result: {total:.4f}")
