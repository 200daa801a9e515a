# realworld: positive fix=safe graphs=2
# Pattern: vllm-project/compressed-tensors (quant_args.py since PR #331:
# `FP4_E2M1_DATA.cast_to_fp4` is `@staticmethod @torch.compile`, called as
# `FP4_E2M1_DATA.cast_to_fp4(tensor)` from `round_to_quantized_type`): a
# compiled staticmethod is called through its class. Here the call also
# passes a Python float that changes per step (a global scale the caller
# computes), which torch guards by value.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 6 calls (1 static, then automatic dynamic); hand-fixed (the
# scale as a float64 0-d tensor at the call): 1, same output.
import torch


class FP4_E2M1_DATA:
    max = 6.0

    @staticmethod
    @torch.compile(backend="eager")
    def cast_to_fp4(x, global_scale):
        x = torch.clamp(x * global_scale, -6.0, 6.0)
        return torch.round(x * 2) / 2


def round_to_quantized_type(tensor, step):
    scale = 1.0 + 0.25 * step
    return FP4_E2M1_DATA.cast_to_fp4(tensor, scale)  # expect: FR003


torch.manual_seed(0)
w = torch.randn(4, 16)
for step in range(6):
    print(round(float(round_to_quantized_type(w, step).sum()), 4))
