"""Sizes 0/1 specialised after the dim was made symbolic (vLLM #30709,
`get_masked_input_and_mask` under `@torch.compile(dynamic=True)`): the
profile and prefill steps pass many tokens, the first 1-token decode step
fails `2 <= input_.size()[0]` and compiles again.  The cure is the one for a
size 1 seen first: `mark_unbacked(input_, 0)` before the eager call."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


@torch.compile(dynamic=True, backend=counting_backend)
def get_masked_input_and_mask(input_, org_vocab_start_index: int, org_vocab_end_index: int):
    vocab_mask = (input_ >= org_vocab_start_index) & (input_ < org_vocab_end_index)
    input_ = vocab_mask * (input_ - org_vocab_start_index)
    return input_, ~vocab_mask


class VocabParallelEmbedding(torch.nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(num_embeddings // 2, embedding_dim))
        self.start, self.end = 0, num_embeddings // 2

    def forward(self, input_):
        masked_input, input_mask = get_masked_input_and_mask(input_, self.start, self.end)
        output = torch.nn.functional.embedding(masked_input, self.weight)
        return output.masked_fill(input_mask.unsqueeze(-1), 0)


torch.manual_seed(0)
embed = VocabParallelEmbedding(128, 16)
total = 0.0
with torch.no_grad():
    for num_tokens in (16, 7, 1, 1, 5):  # profile run, prefill, decode steps
        input_ids = torch.randint(0, 128, (num_tokens,))
        total += float(embed(input_ids).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 3))
