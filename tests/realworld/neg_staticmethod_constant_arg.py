# realworld: negative graphs=1
# Pattern: the twin of pos_staticmethod_float_arg.py (compressed-tensors'
# compiled staticmethod `FP4_E2M1_DATA.cast_to_fp4`, called through its
# class): the float passed is the class's constant `FP4_E2M1_DATA.max`, the
# same at every call, so nothing recompiles and nothing is reported.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 6 calls.
import torch


class FP4_E2M1_DATA:
    max = 6.0

    @staticmethod
    @torch.compile(backend="eager")
    def cast_to_fp4(x, bound):
        x = torch.clamp(x, -bound, bound)
        return torch.round(x * 2) / 2


def round_to_quantized_type(tensor):
    return FP4_E2M1_DATA.cast_to_fp4(tensor, FP4_E2M1_DATA.max)


torch.manual_seed(0)
for step in range(6):
    w = torch.randn(4, 16) * (1 + step)
    print(round(float(round_to_quantized_type(w).sum()), 4))
