# realworld: positive fix=unsafe graphs=3
# Pattern: InternLM/lmdeploy before e81c0dfa (PR #3513, "[ascend] fix
# recompile on different rank"), lmdeploy/pytorch/engine/model_agent.py:
# `BaseModelAgent._async_loop_background` is an `async def` decorated
# `@torch.inference_mode()`; the decorator covers only making the coroutine,
# so the TP rank's `next_token_ids = torch.empty_like(...)` in the awaited
# step is a normal tensor, the next decode step's `input_ids`, while the
# warm-up's inputs were inference tensors: the compiled model's dispatch-key
# guard fails and it compiles again. FR021 reports it (unsafe fix: the mode
# entered in the body; the project wrapped only the `empty_like`).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 3
# graphs; with the mode in the body: 1, the same output.
import asyncio

import torch


class ToyForCausalLM(torch.nn.Module):
    def __init__(self, vocab=32, hidden=8):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, hidden)
        self.lm_head = torch.nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids):
        return self.lm_head(self.embed_tokens(input_ids))


class BaseModelAgent:
    def __init__(self, model):
        self.model = torch.compile(model, fullgraph=True, dynamic=True)
        self.checksum = 0.0

    def warmup(self, batch):
        with torch.inference_mode():
            self.model(torch.zeros(batch, dtype=torch.long))

    async def _async_step_background(self, input_ids, loop_count):
        for _ in range(loop_count):
            logits = self.model(input_ids)
            await asyncio.sleep(0)
            next_token_ids = torch.empty_like(input_ids)
            next_token_ids.copy_(logits.argmax(-1))
            self.checksum += float(next_token_ids.sum())
            input_ids = next_token_ids

    @torch.inference_mode()  # expect: FR021
    async def _async_loop_background(self, in_que):
        for forward_inputs in in_que:
            await self._async_step_background(**forward_inputs)


torch.manual_seed(0)
agent = BaseModelAgent(ToyForCausalLM())
agent.warmup(4)
with torch.inference_mode():
    first = torch.randint(0, 32, (4,))
with torch.no_grad():  # the engine's loop runs without autograd
    asyncio.run(agent._async_loop_background([dict(input_ids=first, loop_count=3)]))
print(round(agent.checksum, 4))
