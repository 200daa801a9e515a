# golden: --unsafe-fixes
# golden: runtime
# lmdeploy before e81c0dfa (PR #3513): the decode loop is an `async def`
# decorated `@torch.inference_mode()`, so its body runs outside inference
# mode; the token ids it makes are normal tensors, the warm-up's were
# inference tensors, and the compiled model compiles again for them.
import asyncio

import torch

torch.manual_seed(0)
model = torch.compile(torch.nn.Embedding(32, 8))


class Agent:
    def __init__(self):
        self.total = 0.0

    def warmup(self):
        with torch.inference_mode():
            self.total += float(model(torch.zeros(4, dtype=torch.long)).sum())

    async def loop(self, steps):
        """The decode loop."""
        with torch.inference_mode():
            for step in range(steps):
                next_token_ids = torch.full((4,), step, dtype=torch.long)
                await asyncio.sleep(0)
                self.total += float(model(next_token_ids).sum())


agent = Agent()
agent.warmup()
asyncio.run(agent.loop(3))
print(round(agent.total, 4))
