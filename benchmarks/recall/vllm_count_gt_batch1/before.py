# Reproduction of vllm-project/vllm BEFORE PR #38933 ("Update `batched_count_greater_than` to handle
# batch size 1 without recompile"): vllm/v1/sample/ops/logprobs.py compiles
# batched_count_greater_than with dynamic=True; Sampler.gather_logprobs calls it with
# (num_reqs, vocab) logprobs. An RL run with batch size 1 first, then larger batches, recompiles
# (sizes 0/1 are specialised even under dynamic=True).
from typing import NamedTuple

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):  # vllm: current_platform.simple_compile_backend ("inductor")
    global GRAPHS
    GRAPHS += 1
    return gm.forward


@torch.compile(dynamic=True, backend=counting_backend)
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
vocab = 64
checksum = 0.0
for num_reqs in [1, 1, 2, 4, 3, 8]:  # warm-up / RL rollouts with batch size 1, then larger batches
    logits = torch.randn(num_reqs, vocab)
    sampled = logits.argmax(-1)
    out = Sampler.gather_logprobs(Sampler.compute_logprobs(logits), 5, sampled)
    checksum += out.selected_token_ranks.sum().item() + out.logprobs.sum().item()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
