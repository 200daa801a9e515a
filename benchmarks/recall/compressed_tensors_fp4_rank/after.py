# Reproduction of vllm-project/compressed-tensors AFTER 55777c4b (the fix applied: an eager `cast_to_fp4`
# flattens to rank 1 and calls the compiled core `_cast_to_fp4`); otherwise identical to before.py.
# The commit: 55777c4b ("[Bugfix] Fix cast_to_fp4 per-rank
# torch.compile recompilation (#734)", squash-merged as 00936cf4, PR #741): the NVFP4 rounding
# `FP4_E2M1_DATA.cast_to_fp4` is a `@torch.compile`d staticmethod (PR #331). Its callers hand it tensors
# of every rank (NVFP4 tensor_group fake quantization unflattens the last dim into (groups, 16): a
# Linear weight arrives as rank 3, a [batch, seq, hidden] activation as rank 4, MoE expert inputs as
# rank 3 with other sizes). Dynamo guards the input's rank and there is no automatic dynamic rank, so
# each rank compiles its own graph; generation on qwen_30b_a3b hit recompile_limit (8) with
# "tensor 'x' rank mismatch. expected 4, actual 3" (issue #734).
# Code: src/compressed_tensors/quantization/quant_args.py (FloatArgs, FP4_E2M1_DATA, FP8_E4M3_DATA,
# QuantizationType, round_to_quantized_type_dtype, round_to_quantized_type_args) verbatim apart from the
# counting backend; the pydantic QuantizationArgs/Scheme and the lifecycle (forward.py) are dropped.
# Driver: the commit's own tests, tests/test_quantization/test_quant_args.py::
# test_cast_to_fp4_no_recompile_across_ranks and test_cast_to_fp4_boundary_values.
from enum import Enum

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class FloatArgs:
    exponent: int
    mantissa: int
    bits: int | None = None
    max: float | None = None
    min: float | None = None
    dtype: torch.dtype | None = None


class FP4_E2M1_DATA(FloatArgs):
    exponent = 2
    mantissa = 1
    bits = 4
    max = 6.0
    min = -6.0

    @staticmethod
    def cast_to_fp4(x):
        # torch.compile guards on input rank, so rank-varying inputs (dense /
        # MoE-expert / group-scaled activations) recompile the core once per
        # rank and exhaust recompile_limit (#734). Flatten to rank-1 so the core
        # (kept compiled per PR #331) is reused; flatten() keeps a stable 1-D size
        # symbol that automatic dynamic shapes promotes, whereas reshape(-1)
        # infers a rank-dependent numel that defeats it.
        return FP4_E2M1_DATA._cast_to_fp4(x.flatten()).reshape(x.shape)

    @staticmethod
    @torch.compile(backend=counting_backend)
    def _cast_to_fp4(x):
        sign = torch.sign(x)
        x = torch.abs(x)
        x[(x >= 0.0) & (x <= 0.25)] = 0.0
        x[(x > 0.25) & (x < 0.75)] = 0.5
        x[(x >= 0.75) & (x <= 1.25)] = 1.0
        x[(x > 1.25) & (x < 1.75)] = 1.5
        x[(x >= 1.75) & (x <= 2.5)] = 2.0
        x[(x > 2.5) & (x < 3.5)] = 3.0
        x[(x >= 3.5) & (x <= 5.0)] = 4.0
        x[x > 5.0] = 6.0
        return x * sign


class FP8_E4M3_DATA(FloatArgs):
    exponent = 4
    mantissa = 3
    bits = 8
    max = torch.finfo(torch.float8_e4m3fn).max
    min = torch.finfo(torch.float8_e4m3fn).min
    dtype = torch.float8_e4m3fn


class QuantizationType(str, Enum):
    """
    Enum storing quantization type options
    """

    INT = "int"
    FLOAT = "float"


def round_to_quantized_type_dtype(
    tensor: torch.Tensor,
    dtype: torch.dtype,
    cast_to_original_dtype: bool = True,
) -> torch.Tensor:
    original_dtype = tensor.dtype
    if torch.is_floating_point(torch.tensor([], dtype=dtype)):
        finfo = torch.finfo(dtype)
        rounded = torch.clamp(tensor, finfo.min, finfo.max).to(dtype)
    else:
        iinfo = torch.iinfo(dtype)
        rounded = torch.round(torch.clamp(tensor, iinfo.min, iinfo.max)).to(dtype)

    if cast_to_original_dtype:
        return rounded.to(original_dtype)
    return rounded


def round_to_quantized_type_args(
    tensor: torch.Tensor,
    args,
    min: torch.Tensor,
    max: torch.Tensor,
    cast_to_original_dtype: bool = True,
) -> torch.Tensor:
    original_dtype = tensor.dtype
    tensor = torch.clamp(tensor, min, max)
    if args.type == QuantizationType.FLOAT:
        if args.num_bits == 8:
            rounded = tensor.to(FP8_E4M3_DATA.dtype)
        elif args.num_bits == 4:
            rounded = FP4_E2M1_DATA.cast_to_fp4(tensor)
        else:
            raise NotImplementedError("Only num_bits in (4, 8) are supported")
    elif args.type == QuantizationType.INT:
        rounded = torch.round(tensor)
    else:
        raise ValueError(f"Invalid quantization type {args.type}")

    if cast_to_original_dtype:
        return rounded.to(original_dtype)
    return rounded


# ---- tests/test_quantization/test_quant_args.py (the commit's tests) ----
def test_cast_to_fp4_no_recompile_across_ranks():
    # rank-varying inputs must not recompile the compiled fp4 rounding core
    outs = []
    for shape in [(16,), (4, 16), (2, 4, 16), (2, 2, 4, 16), (2, 2, 2, 4, 16)]:
        outs.append(FP4_E2M1_DATA.cast_to_fp4(torch.randn(*shape)))
    return outs


def test_cast_to_fp4_boundary_values():
    x = torch.tensor(
        [0.0, 0.25, 0.5, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.75, -3.5]
    )
    expected = torch.tensor(
        [0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, -1.0, -4.0]
    )
    out = FP4_E2M1_DATA.cast_to_fp4(x)
    assert torch.equal(out, expected)

    x = torch.randn(2, 3, 4, 5)
    out2 = FP4_E2M1_DATA.cast_to_fp4(x)
    assert out2.shape == x.shape
    return [out, out2]


torch.manual_seed(0)
outs = test_cast_to_fp4_no_recompile_across_ranks() + test_cast_to_fp4_boundary_values()
checksum = sum(float((o * (i + 1)).sum()) + float(o.abs().sum()) for i, o in enumerate(outs))
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
