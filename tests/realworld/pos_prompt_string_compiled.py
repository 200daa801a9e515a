# realworld: positive fix=none graphs=5
# Pattern: nari-labs/dia before 5f57172d. `Dia.generate` compiles
# `_prepare_generation` in place and passes it the prompt as a `str`;
# `_prepare_text_input` encodes it inside the compiled code (`text.encode`,
# `bytes.replace`, `list(...)`). torch guards the string's value and never
# makes it dynamic: each prompt is a graph. Measured (torch 2.13.0 CPU,
# tests/runtime_probe.py counting backend): 5 graphs for 4 prompts.
# Cure by hand: encode eagerly and pass the tokens (dia's fix, the twin
# neg_prompt_tokens_compiled.py: 1 graph); from the trace, `run --fix
# --unsafe-fixes` runs `_prepare_text_input` eagerly (below the recompile
# limit the decorator is unsafe).
import torch

TEST_PROMPTS = [
    "[S1] Dia is an open weights text to dialogue model.",
    "[S1] Dia is an open weights text to dialogue model. [S2] You get full control over scripts and voices.",
    "[S1] torch.compile is a new feature in PyTorch.",
    "[S1] torch.compile is a new feature in PyTorch. [S2] It compiles your model with a single line of code.",
]


class Dia(torch.nn.Module):
    def __init__(self, text_length=128, text_pad_value=0):
        super().__init__()
        self.text_length = text_length
        self.text_pad_value = text_pad_value
        self.embed = torch.nn.Embedding(256, 8)

    def _prepare_text_input(self, text: str) -> torch.Tensor:
        byte_text = text.encode("utf-8")
        replaced_bytes = byte_text.replace(b"[S1]", b"\x01").replace(b"[S2]", b"\x02")
        text_tokens = list(replaced_bytes)
        src_tokens = torch.full((1, self.text_length), fill_value=self.text_pad_value, dtype=torch.long)
        src_tokens[0, : len(text_tokens)] = torch.tensor(text_tokens[: self.text_length], dtype=torch.long)
        return src_tokens

    def _prepare_generation(self, text: str):
        enc_input_cond = self._prepare_text_input(text)
        enc_input = torch.cat([torch.zeros_like(enc_input_cond), enc_input_cond], dim=0)
        return self.embed(enc_input).sum(dim=1)

    def generate(self, text: str, use_torch_compile: bool = False):
        if use_torch_compile and not hasattr(self, "_compiled"):
            self._prepare_generation = torch.compile(self._prepare_generation, dynamic=True)
            self._compiled = True
        return self._prepare_generation(text)  # expect: FR023


torch.manual_seed(0)
model = Dia()
total = 0.0
with torch.no_grad():
    for text in TEST_PROMPTS:
        total += float(model.generate(text, use_torch_compile=True).sum())
print(f"result: {total:.4f}")
