"""The negative twin of batch_one_first.py: the same sampler, compiled with
the default dynamic=None (vLLM after PR #38933 dropped dynamic=True), whose
first batch has 2 requests, then 4, 3, 8.  No size 0 or 1: the first compile
is static, the next batch recompiles (`tensor 'x' size mismatch at index 0.
expected 2, actual 4`) and automatic dynamic makes dim 0 symbolic.  Not the
0/1 specialisation: the trace's cure is maybe_mark_dynamic, not
mark_unbacked."""
from typing import NamedTuple

import torch


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
@torch.compile(backend="eager")
def batched_count_greater_than(x: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Counts elements in each row of x that are greater than the corresponding value in values."""
    return (x >= values).sum(-1)


class LogprobsTensors(NamedTuple):
    logprob_token_ids: torch.Tensor
    logprobs: torch.Tensor
    selected_token_ranks: torch.Tensor


class Sampler:
    @staticmethod
    def compute_logprobs(logits: torch.Tensor) -> torch.Tensor:
        return logits.log_softmax(dim=-1, dtype=torch.float32)

    @staticmethod
    def gather_logprobs(logprobs: torch.Tensor, num_logprobs: int, token_ids: torch.Tensor) -> LogprobsTensors:
        assert token_ids.dtype == torch.int64
        # Find the topK values.
        topk_logprobs, topk_indices = torch.topk(logprobs, num_logprobs, dim=-1)
        # Get with the logprob of the prompt or sampled token.
        token_ids = token_ids.unsqueeze(-1)
        token_logprobs = logprobs.gather(-1, token_ids)
        # Compute the ranks of the actual token.
        token_ranks = batched_count_greater_than(logprobs, token_logprobs)
        # Concatenate together with the topk.
        indices = torch.cat((token_ids, topk_indices), dim=1)
        logprobs = torch.cat((token_logprobs, topk_logprobs), dim=1)
        indices = indices.to(torch.int32)
        return LogprobsTensors(indices, logprobs, token_ranks)


torch.manual_seed(0)
vocab = 16
for num_reqs in [2, 2, 4, 3, 8]:  # batches of 2 first, then larger ones
    logits = torch.randn(num_reqs, vocab)
    sampled = torch.multinomial(logits.softmax(-1), 1).squeeze(-1)  # the sampled tokens
    out = Sampler.gather_logprobs(Sampler.compute_logprobs(logits), 3, sampled)
    print("result:", num_reqs, out.selected_token_ranks.tolist(), round(out.logprobs.sum().item(), 4))
