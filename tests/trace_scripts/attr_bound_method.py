"""A compiled bound method stored on an attribute and called through it
(gpt-fast / torchtune generation: `self._generate_one_token_fn =
torch.compile(self._generate_one_token)`), with a decaying temperature."""
import torch


class Generator:
    def __init__(self):
        self.head = torch.linspace(-1.0, 1.0, 8)
        # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
        self._generate_one_token_fn = torch.compile(self._generate_one_token, backend="eager")

    def _generate_one_token(self, logits, temperature):
        return torch.softmax(logits / temperature, dim=-1)

    def generate(self, steps):
        total = 0.0
        for step in range(steps):
            logits = torch.linspace(-1.0, 1.0, 8) * self.head
            temperature = 1.0 - 0.05 * step
            total += float(self._generate_one_token_fn(logits, temperature).max())
        return total


print("result:", round(Generator().generate(12), 4))
