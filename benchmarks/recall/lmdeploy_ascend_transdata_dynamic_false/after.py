# lmdeploy (InternLM/lmdeploy) after PR #3531 "[ascend]set transdata dynamic shape true".
# Reduced from lmdeploy/pytorch/backends/dlinfer/ascend/op_backend.py and
# lmdeploy/pytorch/backends/dlinfer/linear.py @ 8ce41ec1c^ (Ascend 310P graph mode, run on CPU).
import os
from functools import lru_cache
from typing import Optional

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---------------------------------------------------------------- stand-in for dlinfer.ops.transdata
# The real op is an ATB TransdataOperation (ACL_FORMAT_ND -> ACL_FORMAT_FRACTAL_NZ). NZ is an NPU *storage*
# format: the logical shape is unchanged. On CPU the stand-in returns a contiguous copy.
@torch.library.custom_op("dlinfer_standin::transdata", mutates_args=())
def _transdata_op(hidden_states: torch.Tensor, transdata_type: int) -> torch.Tensor:
    return hidden_states.contiguous().clone()


@_transdata_op.register_fake
def _(hidden_states, transdata_type):
    return torch.empty_like(hidden_states)


def transdata(hidden_states: torch.Tensor, transdata_type: int):
    """dlinfer.ops.transdata (stand-in body)."""
    return _transdata_op(hidden_states, transdata_type)


# ---------------------------------------------------------------- lmdeploy/pytorch/backends/dlinfer/ascend/op_backend.py
class SocVersion:
    Ascend310P: str = 'Ascend310P'
    Ascend910B: str = 'Ascend910B'

    @classmethod
    @lru_cache(maxsize=1)
    def device_name(cls) -> str:
        return 'Ascend310P3'  # stand-in for torch_npu.npu.get_device_name()

    @classmethod
    def is_Ascend310P(cls) -> bool:
        return cls.device_name().startswith(cls.Ascend310P)

    @classmethod
    def is_Ascend910B(cls) -> bool:
        return cls.device_name().startswith(cls.Ascend910B)


class AscendOpsBackend:
    """ascend layer backend (reduced)."""
    enable_graph = True
    half_negative_inf = torch.finfo(torch.float16).min
    total_slots = None
    # compiled atb Transdataoperation to convert tensor from ACL_FORMAT_ND to ACL_FORMAT_FRACTAL_NZ format.
    transdata_func = None

    @classmethod
    def update_step_context(cls, step_context):
        """update step context (only the 310P graph-mode attention-mask path is kept)."""
        attention_mask = []
        block_num, _, block_size, _ = step_context.kv_caches[0][0].shape

        is_unpaged_prefill = False
        if not step_context.is_decoding:
            is_unpaged_prefill = \
                all((step_context.q_seqlens ==
                     step_context.kv_seqlens).tolist())
        q_seqlens_list = step_context.q_seqlens.tolist()
        kv_seqlens_list = step_context.kv_seqlens.tolist()
        max_q_seq_len = max(q_seqlens_list)
        max_kv_seq_len = max(kv_seqlens_list)

        if not step_context.is_decoding:
            for i in range(step_context.q_start_loc.size(0)):
                q_seq_len = q_seqlens_list[i]
                kv_seq_len = kv_seqlens_list[i]
                # collect attention mask of paged_prefill attention stage.
                if not is_unpaged_prefill:
                    single_attention_mask = torch.logical_not(
                        torch.tril(
                            torch.ones(q_seq_len,
                                       step_context.block_offsets.shape[1] * block_size,
                                       dtype=torch.bool,
                                       device=step_context.block_offsets.device),
                            diagonal=kv_seq_len - q_seq_len,
                        ))
                    attention_mask.append(single_attention_mask)

        if step_context.is_decoding:
            pass
        elif is_unpaged_prefill:
            if SocVersion.is_Ascend310P():
                # Transdata needs dtype to be float16 or int8
                single_attention_mask = torch.triu(
                    torch.ones(max_q_seq_len, max_kv_seq_len, dtype=torch.float16).fill_(-float('inf')),  # .cuda()
                    diagonal=max_kv_seq_len - max_q_seq_len + 1,
                )
                # Convert to NZ format
                attention_mask.append(cls.get_transdata_func()(single_attention_mask, 2))

        if cls.enable_graph:
            if not step_context.is_decoding and not is_unpaged_prefill:
                if SocVersion.is_Ascend310P():
                    # Convert mask to NZ format.
                    attention_mask = [
                        cls.get_transdata_func()(torch.cat(
                            [mask.half() * cls.half_negative_inf for mask in attention_mask]).unsqueeze(1), 2)
                    ]
        return attention_mask

    @staticmethod
    def get_transdata_func():
        """get transdata function."""
        if AscendOpsBackend.transdata_func is None:
            # import dlinfer; from dlinfer.ops import transdata; dlinfer.graph.config.enable_graph_mode = True
            if torch.distributed.is_initialized():
                torch._inductor.config.compile_threads = 1
            AscendOpsBackend.transdata_func = torch.compile(transdata, fullgraph=True, dynamic=True,
                                                            backend=counting_backend)  # real: 'atbgraph'
        return AscendOpsBackend.transdata_func


# ---------------------------------------------------------------- lmdeploy/pytorch/backends/dlinfer/linear.py
class DlinferLinearImpl:
    """Dlinfer linear implementation api."""

    def update_weights(self, weight: torch.Tensor, bias: Optional[torch.Tensor] = None):
        """update weights."""
        if os.getenv('DLINFER_LINEAR_USE_NN_LAYOUT', '0') == '1':
            weight = weight.data.t().contiguous()
        if weight.device.type in ('npu', 'cpu'):  # stand-in: the CPU plays the NPU
            if SocVersion.is_Ascend310P() and not os.getenv('DLINFER_DISABLE_LINEAR_NZ_FORMAT', '0') == '1':
                # Ascend 310P device need weight to be NZ format, so Transdata it initially.
                weight = AscendOpsBackend.get_transdata_func()(weight, 2)
        return weight, bias


# ---------------------------------------------------------------- driver
class StepContext:
    """stand-in for lmdeploy StepContext (fields used by update_step_context)."""

    def __init__(self, q_seqlens, kv_seqlens, is_decoding, block_size=16, max_blocks=4):
        self.q_seqlens = torch.tensor(q_seqlens)
        self.kv_seqlens = torch.tensor(kv_seqlens)
        self.q_start_loc = self.q_seqlens.cumsum(0) - self.q_seqlens
        self.is_decoding = is_decoding
        self.block_offsets = torch.arange(len(q_seqlens) * max_blocks).view(len(q_seqlens), max_blocks)
        # 310P kv cache layout: (block_num, heads*head_size // 16, block_size, 16)
        self.kv_caches = [(torch.empty(32, 4, block_size, 16, dtype=torch.float16), None)]


def checksum_of(t):
    return float(torch.nan_to_num(t.float(), neginf=-1.0).sum())


def main():
    g = torch.Generator().manual_seed(0)
    total = 0.0
    # model load: every linear weight of a small decoder layer is converted to NZ once
    hidden, inter = 64, 176
    weight_shapes = [(3 * hidden, hidden), (hidden, hidden), (2 * inter, hidden), (hidden, inter)]
    impl = DlinferLinearImpl()
    for _layer in range(2):
        for shape in weight_shapes:
            w = torch.randn(*shape, generator=g).half()
            w_nz, _ = impl.update_weights(w)
            total += checksum_of(w_nz)
    # serving: prefills of different prompt lengths (fresh prompts -> unpaged prefill), then one chunked prefill
    for q in ([7, 5], [12, 9], [7, 5]):
        ctx = StepContext(q, q, is_decoding=False)
        for m in AscendOpsBackend.update_step_context(ctx):
            total += checksum_of(m)
    ctx = StepContext([4, 6], [20, 30], is_decoding=False)  # paged prefill (history present)
    for m in AscendOpsBackend.update_step_context(ctx):
        total += checksum_of(m)
    return total


checksum = main()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
