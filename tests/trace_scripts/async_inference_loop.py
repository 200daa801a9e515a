"""A decode loop that is an `async def` decorated `@torch.inference_mode()`
(lmdeploy before e81c0dfa, PR #3513): the decorator covers only making the
coroutine, so the token ids the body makes are normal tensors, while the
warm-up's were inference tensors: the compiled embedding's dispatch-key
guard fails and it compiles again.  FR021's fix (unsafe) enters the mode in
the body: 2 graphs -> 1."""
import asyncio

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


torch.manual_seed(0)
model = torch.compile(torch.nn.Embedding(32, 8), backend=counting_backend)


class Agent:
    def __init__(self):
        self.total = 0.0

    def warmup(self):
        with torch.inference_mode():
            self.total += float(model(torch.zeros(4, dtype=torch.long)).sum())

    @torch.inference_mode()
    async def loop(self, steps):
        for step in range(steps):
            next_token_ids = torch.full((4,), step, dtype=torch.long)
            await asyncio.sleep(0)
            self.total += float(model(next_token_ids).sum())


agent = Agent()
agent.warmup()
with torch.no_grad():
    asyncio.run(agent.loop(3))
print("graphs:", GRAPHS)
print("result:", round(agent.total, 4))
