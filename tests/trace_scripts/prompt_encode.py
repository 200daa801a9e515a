"""A prompt encoded inside compiled code (nari-labs/dia before 5f57172d): the
compiled `_prepare_generation` calls `self._prepare_text_input(text)`, whose
`bytes.replace` breaks the graph; the function then runs as a frame of its
own and guards `text == '[S1] ...'` (and its resumed frame the bytes): each
prompt is a graph, a server's tenth prompt hits the recompile limit.
`@torch.compiler.disable` on `_prepare_text_input` (the string work eager,
the tensor into the compiled code): one graph (measured on 2.13)."""
import sys

import torch

PROMPTS = [f"[S1] Prompt number {i} for the model. [S2] Reply {i * 7}." for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10)]


class Dia(torch.nn.Module):
    def __init__(self, text_length=64, text_pad_value=0):
        super().__init__()
        self.text_length = text_length
        self.text_pad_value = text_pad_value
        self.embed = torch.nn.Embedding(256, 8)

    def _prepare_text_input(self, text: str) -> torch.Tensor:
        byte_text = text.encode("utf-8")
        replaced_bytes = byte_text.replace(b"[S1]", b"\x01").replace(b"[S2]", b"\x02")
        text_tokens = list(replaced_bytes)
        current_len = len(text_tokens)
        src_tokens = torch.full((1, self.text_length), fill_value=self.text_pad_value, dtype=torch.long)
        src_tokens[0, :current_len] = torch.tensor(text_tokens[: self.text_length], dtype=torch.long)
        return src_tokens

    def _prepare_generation(self, text: str):
        enc_input_cond = self._prepare_text_input(text)
        enc_input = torch.cat([torch.zeros_like(enc_input_cond), enc_input_cond], dim=0)
        return self.embed(enc_input).sum(dim=1)

    def generate(self, text: str):
        if not hasattr(self, "_compiled"):
            # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
            self._prepare_generation = torch.compile(self._prepare_generation, dynamic=True, backend="eager")
            self._compiled = True
        return self._prepare_generation(text)


torch.manual_seed(0)
model = Dia()
total = 0.0
with torch.no_grad():
    for text in PROMPTS:
        total += float(model.generate(text).sum())
print(f"result: {total:.4f}")
