"""A sampler module compiled as `self.sampler = torch.compile(self.sampler)`
(vllm-rbln before 7e0d70ff), its forward inherited from a base class, gets
`(1, V)` logits: the last row of a concatenation of one row per prefill
chunk, stride `(n * V, 1)`. Every new chunk count fails the stride guard of
dim 0 (size 1), which `.contiguous()` keeps as it is (3 chunk counts: 3
graphs); a view of its own shape: 1."""
import torch
from torch import nn


class Sampler(nn.Module):
    def forward(self, logits, temperature):
        return torch.softmax(logits / temperature, dim=-1).argmax(dim=-1)


class RBLNSampler(Sampler):
    pass


class Runner:
    def __init__(self, vocab_size=16, rbln=True):
        self.lm_head = nn.Linear(8, vocab_size)
        if rbln:
            sampler = RBLNSampler()
        else:
            sampler = Sampler()
        self.sampler = sampler
        self.sampler = torch.compile(self.sampler, backend="eager", dynamic=False)

    def prefill(self, chunks):
        logits = torch.cat([self.lm_head(chunk)[:, None] for chunk in chunks], dim=1)
        return logits[:, -1]

    def sample(self, logits, temperature):
        return self.sampler(logits=logits, temperature=temperature)


torch.manual_seed(0)
runner = Runner()
total = 0
with torch.no_grad():
    for n_chunks in (1, 3, 2, 3):
        logits = runner.prefill([torch.randn(1, 8) for _ in range(n_chunks)])
        total += int(runner.sample(logits, torch.tensor(0.7)).sum())
print("result:", total)
