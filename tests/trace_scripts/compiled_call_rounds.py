"""transformers' static-cache decode step (Gemma3 before the 4D-mask fix):
`torch.compile(self.__call__, dynamic=False)` kept on the model by
`get_compiled_call()` and called as `model_forward(**model_inputs)`, whose
optional `attention_mask` grows by one column each step: every step is a
graph under `dynamic=False` (4).  Removing `dynamic=False` (FR001) leaves
one recompile (2 graphs); the rerun's trace then shows the mask's dim 1
changing once, which a mark, under a test that the optional entry is a
tensor, cures: 1 graph, over two rounds of `run --fix`."""
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, vocab)
        self._compiled_call = None

    def forward(self, input_ids, attention_mask=None):
        h = self.embed(input_ids)
        if attention_mask is not None:
            h = h * (attention_mask.sum(-1, keepdim=True) / attention_mask.shape[-1]).unsqueeze(-1)
        return self.proj(h)

    def get_compiled_call(self):
        if self._compiled_call is None:
            # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
            self._compiled_call = torch.compile(self.__call__, dynamic=False, backend="eager")
        return self._compiled_call

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None):
        model_inputs = {"input_ids": input_ids[:, -1:].clone(memory_format=torch.contiguous_format)}
        if attention_mask is not None:
            model_inputs["attention_mask"] = attention_mask
        return model_inputs

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, max_new_tokens):
        model_forward = self.get_compiled_call()
        for _ in range(max_new_tokens):
            model_inputs = self.prepare_inputs_for_generation(input_ids, attention_mask)
            logits = model_forward(**model_inputs)
            next_tokens = logits[:, -1, :].argmax(-1)
            input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=-1)
        return input_ids


torch.manual_seed(0)
model = TinyLM(32, 8)
out = model.generate(torch.randint(0, 32, (2, 3)), torch.ones(2, 3), max_new_tokens=4)
print(f"result: {int(out.sum())}")
