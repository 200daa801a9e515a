# realworld: negative graphs=1
# Twin of pos_prompt_string_compiled.py after dia's fix (5f57172d): the
# prompt is encoded eagerly (`_encode_text`) and the compiled
# `_prepare_generation` gets the tokens as a tensor, padded inside (under
# `dynamic=True` their length is symbolic). Measured (torch 2.13.0 CPU,
# tests/runtime_probe.py counting backend): 1 graph for 4 prompts. No finding.
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

    def _encode_text(self, text: str) -> torch.Tensor:
        byte_text = text.encode("utf-8")
        replaced_bytes = byte_text.replace(b"[S1]", b"\x01").replace(b"[S2]", b"\x02")
        return torch.tensor(list(replaced_bytes)[: self.text_length], dtype=torch.long)

    def _pad_text_input(self, text_tokens: torch.Tensor) -> torch.Tensor:
        src_tokens = torch.full((1, self.text_length), fill_value=self.text_pad_value, dtype=torch.long)
        src_tokens[0, : text_tokens.shape[0]] = text_tokens
        return src_tokens

    def _prepare_generation(self, text_tokens: torch.Tensor):
        enc_input_cond = self._pad_text_input(text_tokens)
        enc_input = torch.cat([torch.zeros_like(enc_input_cond), enc_input_cond], dim=0)
        return self.embed(enc_input).sum(dim=1)

    def generate(self, text: str, use_torch_compile: bool = False):
        if use_torch_compile and not hasattr(self, "_compiled"):
            self._prepare_generation = torch.compile(self._prepare_generation, dynamic=True)
            self._compiled = True
        return self._prepare_generation(self._encode_text(text))


torch.manual_seed(0)
model = Dia()
total = 0.0
with torch.no_grad():
    for text in TEST_PROMPTS:
        total += float(model.generate(text, use_torch_compile=True).sum())
print(f"result: {total:.4f}")
