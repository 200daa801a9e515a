# realworld: positive fix=safe graphs=2
# Pattern: pytorch-labs/gpt-fast (generate.py at
# 32971d3129541c5bfb4f715abc33d1c5f408d204: `temperature: float = 0.8` is a
# parameter default, handed on to the compiled `decode_one_token`), and the
# many `def generate(self, idx, max_new_tokens, temperature=1.0, ...)` of
# nanoGPT-style models: the float is known only by the parameter's default,
# and callers pass other values.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 6 generate() calls; hand-fixed (T as a float64 0-d tensor at the
# call): 1, same output.
import torch


@torch.compile(backend="eager")
def sample_logits(logits, temperature):
    probs = torch.softmax(logits / temperature, dim=-1)
    return probs.max(dim=-1).values


class Generator:
    def __init__(self, vocab=16):
        torch.manual_seed(0)
        self.head = torch.randn(8, vocab)

    def generate(self, x, steps=3, T=0.7):
        out = []
        for _ in range(steps):
            logits = x @ self.head
            tok = sample_logits(logits, T)  # expect: FR003
            out.append(round(float(tok[0]), 4))
        return out


gen = Generator()
x = torch.randn(2, 8)
print(gen.generate(x))
for t in (0.5, 0.9, 1.0, 1.2, 1.5):
    print(gen.generate(x, T=t))
