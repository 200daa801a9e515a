# Reproduction of vllm-project/vllm AFTER PR #30709 ("[Misc][LLaMa4] Compile LLaMa Vision Encoder"):
# the multimodal model runner calls LlamaModel.embed_input_ids eagerly (outside the compiled backbone),
# and with tensor parallelism VocabParallelEmbedding.forward_native calls get_masked_input_and_mask, which
# is compiled on its own with `@torch.compile(dynamic=True)`. A 1-token (decode) step after the
# multi-token warm-up/prefill steps recompiles: size 1 is specialised even under dynamic=True.
import torch
import torch.nn.functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):  # vllm: current_platform.simple_compile_backend ("inductor")
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# vllm/model_executor/layers/vocab_parallel_embedding.py
@torch.compile(dynamic=True, backend=counting_backend)
def get_masked_input_and_mask(
    input_: torch.Tensor,
    org_vocab_start_index: int,
    org_vocab_end_index: int,
    num_org_vocab_padding: int,
    added_vocab_start_index: int,
    added_vocab_end_index: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    # torch.compile will fuse all of the pointwise ops below
    # into a single kernel, making it very fast
    org_vocab_mask = (input_ >= org_vocab_start_index) & (input_ < org_vocab_end_index)
    added_vocab_mask = (input_ >= added_vocab_start_index) & (input_ < added_vocab_end_index)
    added_offset = (
        added_vocab_start_index
        - (org_vocab_end_index - org_vocab_start_index)
        - num_org_vocab_padding
    )
    valid_offset = (org_vocab_start_index * org_vocab_mask) + (added_offset * added_vocab_mask)
    vocab_mask = org_vocab_mask | added_vocab_mask
    input_ = vocab_mask * (input_ - valid_offset)
    return input_, ~vocab_mask


def tensor_model_parallel_all_reduce(x):  # stand-in: single process, the other shards contribute zeros
    return x


class VocabParallelEmbeddingShardIndices:
    def __init__(self, org_vocab_start_index, org_vocab_end_index, num_org_vocab_padding,
                 added_vocab_start_index, added_vocab_end_index):
        self.org_vocab_start_index = org_vocab_start_index
        self.org_vocab_end_index = org_vocab_end_index
        self.num_org_vocab_padding = num_org_vocab_padding
        self.added_vocab_start_index = added_vocab_start_index
        self.added_vocab_end_index = added_vocab_end_index


class VocabParallelEmbedding(torch.nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, tp_size: int = 2, tp_rank: int = 0):
        super().__init__()
        self.tp_size = tp_size
        per_partition = num_embeddings // tp_size
        start = tp_rank * per_partition
        self.shard_indices = VocabParallelEmbeddingShardIndices(start, start + per_partition, 0,
                                                                num_embeddings, num_embeddings)
        self.weight = torch.nn.Parameter(torch.randn(per_partition, embedding_dim))

    def forward_native(self, input_):
        if self.tp_size > 1:
            # Build the mask.
            masked_input, input_mask = get_masked_input_and_mask(
                input_,
                self.shard_indices.org_vocab_start_index,
                self.shard_indices.org_vocab_end_index,
                self.shard_indices.num_org_vocab_padding,
                self.shard_indices.added_vocab_start_index,
                self.shard_indices.added_vocab_end_index,
            )
        else:
            masked_input = input_
        # Get the embeddings.
        output_parallel = F.embedding(masked_input.long(), self.weight)
        # Mask the output embedding.
        if self.tp_size > 1:
            output_parallel.masked_fill_(input_mask.unsqueeze(-1), 0)
        # Reduce across all the model parallel GPUs.
        output = tensor_model_parallel_all_reduce(output_parallel)
        return output

    forward = forward_native


# vllm/model_executor/models/llama.py
class LlamaModel(torch.nn.Module):
    def __init__(self, vocab_size: int = 128, hidden_size: int = 16):
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(vocab_size, hidden_size)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        # Need explicit mark here to avoid recompile from 0/1 spec
        # since VocabEmbedding uses a different torch.compile decorator
        torch._dynamo.decorators.mark_unbacked(input_ids, 0)
        return self.embed_tokens(input_ids)


torch.manual_seed(0)
model = LlamaModel()
checksum = 0.0
with torch.no_grad():
    # GPUModelRunner: profile run (max_num_tokens), a prefill, then decode steps of 1 token
    for num_tokens in [16, 7, 1, 1, 5]:
        input_ids = torch.randint(0, 128, (num_tokens,))
        inputs_embeds = model.embed_input_ids(input_ids)
        checksum += inputs_embeds.sum().item() + num_tokens
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
