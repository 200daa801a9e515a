"""A compiled model called with its inputs in a dict (diffusers' tests before
#14297: ``model(**get_dummy_inputs(...))``; training loops: ``model(**batch)``),
under ``dynamic=True``.  The first batch has 16 tokens of 16 channels: duck
sizing gives both dims one symbol, the weight pins it to 16, and 32 tokens
recompile (2 graphs).  The trace's mark must reach the dict's entry:
``d["hidden_states"]``, the call's ``**`` expression bound to a name first."""
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.img_in = torch.nn.Linear(16, 32)
        self.proj = torch.nn.Linear(32, 4)

    def forward(self, hidden_states, scale):
        return self.proj(torch.relu(self.img_in(hidden_states))) * scale


def get_dummy_inputs(gen, tokens):
    return {"hidden_states": torch.randn((1, tokens, 16), generator=gen), "scale": torch.tensor(0.5)}


torch.manual_seed(0)
model = torch.compile(Model(), dynamic=True, backend="eager")
gen = torch.Generator().manual_seed(0)
total = 0.0
with torch.no_grad():
    for tokens in (16, 32, 64):
        total += float(model(**get_dummy_inputs(gen, tokens)).sum())
    for tokens in (16, 48):
        batch = get_dummy_inputs(gen, tokens)
        total += float(model(**batch).sum())
print("result:", round(total, 3))
