# Reproduction of vllm-project/llm-compressor BEFORE aa5f4b0b7 ("reduce recompiles in compiled MSE
# observer path", on the branch of PR #2384 "perf: make MSE observer compatible with torch.compile").
# src/llmcompressor/observers/mse.py at aa5f4b0b7^ (= c26cb75b9): the MSE observers' grid search
# calls `_compute_chunk_compiled = torch.compile(_compute_chunk, dynamic=True)` on the observed value
# as `flatten_for_calibration` hands it over (a view: weights `(1, rows, groups, group_size)`,
# activations `(tokens, 1, hidden)`), and `_compute_candidate_error_compiled` for chunk_size 1.
# Calibrating a model compiles again for the shapes/strides of the next layers.
#
# compressed_tensors (QuantizationArgs, calculate_qparams, generate_gparam, fake_quantize and the
# helpers they call) is copied below from vllm-project/compressed-tensors@077e752b, trimmed to the
# int / token / tensor / group paths used here (no pydantic, no FP4/FP8/MX/block branches).
from enum import Enum
from math import ceil
from typing import Optional, Tuple

import torch
import torch._dynamo.config

GRAPHS = 0


def counting_backend(gm, example_inputs):  # llm-compressor: torch.compile default backend (inductor)
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ----------------------------------------------------------------------------------------------
# compressed_tensors (trimmed copy)
# ----------------------------------------------------------------------------------------------
class QuantizationType(str, Enum):
    INT = "int"
    FLOAT = "float"


class QuantizationStrategy(str, Enum):
    TENSOR = "tensor"
    CHANNEL = "channel"
    GROUP = "group"
    BLOCK = "block"
    TOKEN = "token"
    TENSOR_GROUP = "tensor_group"
    ATTN_HEAD = "attn_head"


class FP8_E4M3_DATA:
    exponent = 4
    mantissa = 3
    bits = 8
    max = torch.finfo(torch.float8_e4m3fn).max
    min = torch.finfo(torch.float8_e4m3fn).min
    dtype = torch.float8_e4m3fn


class FP4_E2M1_DATA:
    exponent = 2
    mantissa = 1
    bits = 4
    max = 6.0
    min = -6.0
    dtype = None


class QuantizationArgs:
    """pydantic BaseModel in compressed_tensors; the fields used here, validated the same way."""

    def __init__(self, num_bits=8, type=QuantizationType.INT, symmetric=True, group_size=None,
                 strategy=None, dynamic=False, scale_dtype=None, zp_dtype=None, observer=None,
                 observer_kwargs=None):
        self.num_bits = num_bits
        self.type = type
        self.symmetric = symmetric
        self.group_size = group_size
        self.strategy = strategy
        self.dynamic = dynamic
        self.scale_dtype = scale_dtype
        self.observer = observer
        self.observer_kwargs = observer_kwargs or {}
        # validate_model_after: zp_dtype defaults to pytorch_dtype()
        self.zp_dtype = zp_dtype if zp_dtype is not None else self.pytorch_dtype()

    def pytorch_dtype(self) -> torch.dtype:
        if self.num_bits <= 8:
            return torch.int8
        elif self.num_bits <= 16:
            return torch.int16
        return torch.int32

    def model_copy(self, update):
        new = QuantizationArgs.__new__(QuantizationArgs)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(update)
        return new


def round_to_quantized_type_dtype(tensor, dtype, cast_to_original_dtype=True):
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


def round_to_quantized_type_args(tensor, args, min, max, cast_to_original_dtype=True):
    original_dtype = tensor.dtype
    tensor = torch.clamp(tensor, min, max)
    if args.type == QuantizationType.INT:
        rounded = torch.round(tensor)
    else:
        raise ValueError(f"Invalid quantization type {args.type}")

    if cast_to_original_dtype:
        return rounded.to(original_dtype)
    return rounded


def should_generate_mx_scales(args):
    return (
        args.num_bits in (4, 8)
        and args.type == QuantizationType.FLOAT.value
        and args.group_size == 32
        and args.scale_dtype == torch.uint8
    )


def maybe_convert_from_mx_exp(args, scale):
    original_dtype = scale.dtype
    if should_generate_mx_scales(args):
        scale_exp = scale.to(torch.int32) - 127
        scale = 2.00 ** (scale_exp.to(torch.float))
        return scale.to(original_dtype)
    return scale


def _get_dtype_eps(dtype: torch.dtype) -> float:
    if dtype == FP8_E4M3_DATA.dtype:
        return 0.125
    elif dtype == FP4_E2M1_DATA.dtype:
        return 0.25
    elif torch.is_floating_point(torch.tensor([], dtype=dtype)):
        return torch.finfo(dtype).eps
    else:
        return 1


def calculate_range(quantization_args, device):
    if quantization_args.type == QuantizationType.INT:
        bit_range = 2.0**quantization_args.num_bits
        q_max = torch.tensor(bit_range / 2 - 1, device=device)
        q_min = torch.tensor(-bit_range / 2, device=device)
    else:
        raise ValueError(f"Invalid quantization type {quantization_args.type}")

    return q_min, q_max


def calculate_qparams(min_vals, max_vals, quantization_args, global_scale=None):
    # based on the implementations for consuming quantized values,
    # 0.0 must always be representable within the quantized range
    min_vals = torch.min(min_vals, torch.zeros_like(min_vals))
    max_vals = torch.max(max_vals, torch.zeros_like(max_vals))

    device = min_vals.device

    bit_min, bit_max = calculate_range(quantization_args, device)
    bit_range = bit_max - bit_min

    # 1. Generate scale and zero-point
    if quantization_args.symmetric:
        max_val_pos = torch.max(torch.abs(min_vals), torch.abs(max_vals))
        scales = max_val_pos / (float(bit_range) / 2)
        zero_points = torch.zeros(scales.shape, device=device, dtype=min_vals.dtype)
    else:
        scales = (max_vals - min_vals) / float(bit_range)
        zero_points = bit_min - (min_vals / scales)
        zero_points = torch.clamp(zero_points, bit_min, bit_max)

    # 2. Conditionally scale the generated local scale by a global_scale
    if global_scale is not None:
        scales = global_scale * scales

    # 3. Conditionally round the scale to the quantized dtype, if scale_dtype is set
    if quantization_args.scale_dtype is not None:
        scales = round_to_quantized_type_dtype(scales, dtype=quantization_args.scale_dtype)

    # 4. Optionally remove exponent
    scales = maybe_convert_from_mx_exp(quantization_args, scales)

    # 5. Update any 0s with small values to
    # prevent div by 0
    eps = _get_dtype_eps(
        dtype=(
            quantization_args.scale_dtype
            if quantization_args.scale_dtype is not None
            else scales.dtype
        )
    )
    scales = torch.where(
        scales == 0,
        torch.tensor(eps, dtype=scales.dtype, device=device),
        scales,
    )

    # 6. Round the zp to zp_dtype
    zero_points = round_to_quantized_type_dtype(
        zero_points, dtype=quantization_args.zp_dtype, cast_to_original_dtype=False
    )

    if scales.ndim == 0:
        scales = scales.reshape(1)
        zero_points = zero_points.reshape(1)

    return scales, zero_points


def generate_gparam(updated_min_val, updated_max_val, scale_data=FP8_E4M3_DATA,
                    quant_data=FP4_E2M1_DATA, dtype=torch.float32):
    min_vals = torch.min(updated_min_val, torch.zeros_like(updated_min_val))
    max_vals = torch.max(updated_max_val, torch.zeros_like(updated_max_val))
    max_val_pos = torch.max(torch.abs(min_vals), torch.abs(max_vals))
    max_val_pos = torch.clamp(max_val_pos, min=torch.finfo(max_val_pos.dtype).tiny)
    global_scale = scale_data.max * quant_data.max / max_val_pos
    global_scale = torch.nan_to_num(global_scale, nan=1.0, posinf=1.0, neginf=1.0)
    return global_scale.to(dtype).reshape([1])


@torch.no_grad()
def _quantize_dequantize(x, scale, zero_point, q_min, q_max, args, global_scale=None):
    # compute effective scale once
    if global_scale is not None:
        scale = scale / global_scale

    scaled = x / scale

    if zero_point is not None:
        scaled += zero_point.to(x.dtype)

    # clamp and round (stays in float — no int8/fp8 intermediate)
    quantized = round_to_quantized_type_args(tensor=scaled, args=args, min=q_min, max=q_max)

    # dequantize: subtract zero_point and multiply by scale
    dequant = quantized.to(scale.dtype)
    if zero_point is not None:
        dequant = dequant - zero_point.to(scale.dtype)

    return dequant * scale


def _apply_quantize_op(x, scale, zero_point, q_min, q_max, args, dtype, do_quantize,
                       do_dequantize, global_scale):
    """Dispatch to the appropriate quantization kernel (quantize-only / dequantize-only trimmed)."""
    if do_quantize and do_dequantize:
        return _quantize_dequantize(
            x=x,
            scale=scale,
            zero_point=zero_point,
            q_min=q_min,
            q_max=q_max,
            args=args,
            global_scale=global_scale,
        )
    raise NotImplementedError


@torch.no_grad()
def _process_quantization(x, scale, zero_point, args, g_idx=None, dtype=None, do_quantize=True,
                          do_dequantize=True, global_scale=None):
    q_min, q_max = calculate_range(args, x.device)
    # (block and group branches trimmed: the MSE observer quantizes with TOKEN args)
    # covers tensor, channel, token, and attn_head strategies
    return _apply_quantize_op(
        x, scale, zero_point, q_min, q_max, args, dtype, do_quantize, do_dequantize, global_scale,
    )


@torch.no_grad()
def fake_quantize(x, scale, zero_point, args, g_idx=None, global_scale=None):
    return _process_quantization(
        x=x,
        scale=scale,
        zero_point=zero_point,
        args=args,
        do_quantize=True,
        do_dequantize=True,
        g_idx=g_idx,
        global_scale=global_scale,
    )


# ----------------------------------------------------------------------------------------------
# llmcompressor/observers/compile_config.py
# ----------------------------------------------------------------------------------------------
_enable_torch_compile = False
_compile_chunk_size = 5


def set_torch_compile(enabled: bool, chunk_size: int = 5):
    global _enable_torch_compile, _compile_chunk_size
    _enable_torch_compile = enabled
    _compile_chunk_size = chunk_size


def get_torch_compile() -> bool:
    return _enable_torch_compile


def get_compile_chunk_size() -> int:
    return _compile_chunk_size


# ----------------------------------------------------------------------------------------------
# llmcompressor/observers/helpers.py (flatten_for_calibration; block/attention paths trimmed)
# ----------------------------------------------------------------------------------------------
def flatten_for_calibration(value, base_name, args):
    if base_name == "weight":
        return _flatten_weight(value, args)
    elif base_name in ("input", "output"):
        return _flatten_activation(value, args)
    else:
        raise ValueError(f"Unknown quantization base name: {base_name}")


def _flatten_weight(value, args):
    # value.shape = (num_rows, num_cols)

    if args.strategy == QuantizationStrategy.TENSOR:
        # (1, 1, num_weight_elems)
        return value.reshape((1, 1, -1))

    if args.strategy == QuantizationStrategy.CHANNEL:
        # (1, num_rows, 1, num_cols)
        return value.unsqueeze(-2).unsqueeze(0)

    if args.strategy in (QuantizationStrategy.GROUP, QuantizationStrategy.TENSOR_GROUP):
        # (1, num_rows, num_groups, group_size)
        return value.unflatten(-1, (-1, args.group_size)).unsqueeze(0)

    raise ValueError(f"Unknown strategy {args.strategy}")


def _flatten_activation(value, args):
    # value.shape = (batch_size, seq_len, hidden_dim)

    if args.strategy == QuantizationStrategy.TENSOR:
        # (batch_size * seq_len, 1, hidden_dim)
        return value.reshape((-1, 1, value.size(-1)))

    if args.strategy == QuantizationStrategy.TOKEN:
        return value

    if args.strategy in (QuantizationStrategy.GROUP, QuantizationStrategy.TENSOR_GROUP):
        return value.flatten(0, 1).unflatten(-1, (-1, args.group_size))

    raise ValueError(f"Unknown strategy {args.strategy}")


def lerp(start, end, weight):
    """torch lerp_kernel is not implemeneted for all data types"""
    return (start * (1.0 - weight)) + (end * weight)


# ----------------------------------------------------------------------------------------------
# llmcompressor/observers/base.py (DDP sync, fusion, registry trimmed)
# ----------------------------------------------------------------------------------------------
MinMaxTuple = Tuple[torch.Tensor, torch.Tensor]


class Observer(torch.nn.Module):
    def __init__(self, base_name, args, **observer_kwargs):
        super().__init__()
        self.base_name = base_name
        self.args = args

        self.args.observer_kwargs = self.args.observer_kwargs or {}
        self.args.observer_kwargs.update(observer_kwargs)

    @property
    def has_statistics(self) -> bool:
        return hasattr(self, "min_vals")

    def _get_module_param(self, name):
        return None  # no attached module / global_scale for int group quantization

    @torch.no_grad
    def get_qparams(self):
        assert self.has_statistics, "No statistics available. Call observer(value) first."
        global_scale = None
        scale, zero_point = calculate_qparams(
            min_vals=self.min_vals,
            max_vals=self.max_vals,
            quantization_args=self.args,
            global_scale=global_scale,
        )
        return {"scale": scale, "zero_point": zero_point, "global_scale": global_scale}

    @torch.no_grad
    def forward(self, observed):
        if observed.numel() == 0:
            return self

        observed = flatten_for_calibration(observed, self.base_name, self.args)
        self.update_statistics_from_observed(observed)
        return self


# ----------------------------------------------------------------------------------------------
# llmcompressor/observers/mse.py at c26cb75b9 (docstrings shortened)
# ----------------------------------------------------------------------------------------------
# Allow torch.compile to handle scalar conversions inside
# compressed_tensors' calculate_qparams (float(bit_range)).
# Same approach as GPTQ compile path (commit a4f9ba2e).
torch._dynamo.config.capture_scalar_outputs = True


class MemorylessMSEObserver(Observer):  # @Observer.register("memoryless_mse")
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        observer_kwargs = self.args.observer_kwargs
        self.maxshrink = observer_kwargs.get("maxshrink", 0.20)
        self.patience = observer_kwargs.get("patience", 5)
        self.grid = observer_kwargs.get("grid", 100.0)
        self.norm = observer_kwargs.get("norm", 2.4)

        # Pre-create token_args to avoid patch_attr context manager
        # which causes torch.compile graph breaks
        self._token_args = self.args.model_copy(
            update={"strategy": QuantizationStrategy.TOKEN}
        )

    def _call_grid_search(self, observed, global_scale, optimize_global_scale):
        return _grid_search_mse(
            observed,
            self.args,
            self._token_args,
            self.maxshrink,
            self.patience,
            self.grid,
            self.norm,
            global_scale=global_scale,
            optimize_global_scale=optimize_global_scale,
            enable_compile=get_torch_compile(),
            chunk_size=get_compile_chunk_size(),
        )

    def get_min_max(self, observed):
        # min[min_vals, max_vals](mse_quant_error)
        global_scale = self._get_module_param("global_scale")
        return self._call_grid_search(observed, global_scale, False)

    def update_statistics_from_observed(self, observed):
        self.min_vals, self.max_vals = self.get_min_max(observed)


class MovingAverageMSEObserver(Observer):  # @Observer.register("mse"), MovingAverageObserverBase
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.avg_constant = self.args.observer_kwargs.get("averaging_constant", 0.01)
        observer_kwargs = self.args.observer_kwargs
        self.maxshrink = observer_kwargs.get("maxshrink", 0.20)
        self.patience = observer_kwargs.get("patience", 5)
        self.grid = observer_kwargs.get("grid", 100.0)
        self.norm = observer_kwargs.get("norm", 2.4)

        # Pre-create token_args to avoid patch_attr context manager
        # which causes torch.compile graph breaks
        self._token_args = self.args.model_copy(
            update={"strategy": QuantizationStrategy.TOKEN}
        )

    def _call_grid_search(self, observed, global_scale, optimize_global_scale):
        return _grid_search_mse(
            observed,
            self.args,
            self._token_args,
            self.maxshrink,
            self.patience,
            self.grid,
            self.norm,
            global_scale=global_scale,
            optimize_global_scale=optimize_global_scale,
            enable_compile=get_torch_compile(),
            chunk_size=get_compile_chunk_size(),
        )

    def get_current_min_max(self, observed):
        # min[min_vals, max_vals](mse_quant_error)
        global_scale = self._get_module_param("global_scale")
        return self._call_grid_search(observed, global_scale, False)

    def update_statistics_from_observed(self, observed):
        min_vals, max_vals = self.get_current_min_max(observed)
        if hasattr(self, "min_vals") and self.avg_constant != 1.0:
            min_vals = lerp(self.min_vals, min_vals, self.avg_constant)
            max_vals = lerp(self.max_vals, max_vals, self.avg_constant)
        self.min_vals = min_vals
        self.max_vals = max_vals


def _compute_candidate_error(
    observed: torch.Tensor,
    args: QuantizationArgs,
    token_args: QuantizationArgs,
    min_val: torch.Tensor,
    max_val: torch.Tensor,
    p: float,
    norm: float,
    global_scale: Optional[torch.Tensor],
    optimize_global_scale: bool,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Compute the quantization error for a single shrink factor."""
    shrinked_min_val = p * min_val
    shrinked_max_val = p * max_val

    if optimize_global_scale:
        global_scale = generate_gparam(shrinked_min_val, shrinked_max_val)

    candidate_scales, candidate_zero_points = calculate_qparams(
        min_vals=shrinked_min_val,
        max_vals=shrinked_max_val,
        quantization_args=args,
        global_scale=global_scale,
    )

    # Use pre-created token_args instead of patch_attr context manager
    # to maintain torch.compile compatibility
    q = fake_quantize(
        observed,
        candidate_scales.unsqueeze(-1),
        candidate_zero_points.unsqueeze(-1),
        token_args,
        global_scale=global_scale,
    ).to(observed.dtype)

    err = torch.sum((q - observed).abs().pow(norm), dim=(0, -1))
    return err, shrinked_min_val, shrinked_max_val


def _compute_chunk(
    observed: torch.Tensor,
    args: QuantizationArgs,
    token_args: QuantizationArgs,
    min_val: torch.Tensor,
    max_val: torch.Tensor,
    ps: torch.Tensor,
    chunk_size: int,
    norm: float,
    global_scale: Optional[torch.Tensor],
    optimize_global_scale: bool,
    best_error: torch.Tensor,
    best_min_val: torch.Tensor,
    best_max_val: torch.Tensor,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Compute quantization errors for multiple shrink factors in one call, updating best
    results via torch.where (chunk_size is a Python int: dynamo unrolls the loop)."""
    for j in range(chunk_size):
        p = ps[j]
        shrinked_min = p * min_val
        shrinked_max = p * max_val

        gs = global_scale
        if optimize_global_scale:
            gs = generate_gparam(shrinked_min, shrinked_max)

        candidate_scales, candidate_zero_points = calculate_qparams(
            min_vals=shrinked_min,
            max_vals=shrinked_max,
            quantization_args=args,
            global_scale=gs,
        )

        q = fake_quantize(
            observed,
            candidate_scales.unsqueeze(-1),
            candidate_zero_points.unsqueeze(-1),
            token_args,
            global_scale=gs,
        ).to(observed.dtype)

        err = torch.sum((q - observed).abs().pow(norm), dim=(0, -1))
        del q

        improved = err < best_error
        best_error = torch.where(improved, err, best_error)
        best_min_val = torch.where(improved, shrinked_min, best_min_val)
        best_max_val = torch.where(improved, shrinked_max, best_max_val)

    return best_error, best_min_val, best_max_val


# Compiled variants.
# _compute_chunk_compiled: processes chunk_size candidates per call,
# reducing per-call overhead by the chunk factor.
# _compute_candidate_error_compiled: single-candidate fallback (chunk_size=1).
_compute_chunk_compiled = torch.compile(_compute_chunk, dynamic=True, backend=counting_backend)
_compute_candidate_error_compiled = torch.compile(
    _compute_candidate_error, dynamic=True, backend=counting_backend
)


def _grid_search_mse(
    observed: torch.Tensor,
    args: QuantizationArgs,
    token_args: QuantizationArgs,
    maxshrink: float,
    patience: float,
    grid: float,
    norm: float,
    global_scale: torch.Tensor | None = None,
    optimize_global_scale: bool = False,
    enable_compile: bool = False,
    chunk_size: int = 5,
) -> MinMaxTuple:
    """1-D grid search for per-channel min/max ranges that minimize quantization error."""
    min_val = torch.amin(observed, dim=(0, -1))
    max_val = torch.amax(observed, dim=(0, -1))
    best_error = torch.full_like(min_val, torch.finfo(min_val.dtype).max)
    best_min_val = min_val.clone()
    best_max_val = max_val.clone()

    total_steps = int(maxshrink * grid)
    no_improve_count = 0

    if enable_compile and chunk_size > 1:
        # Chunked compile path: batch multiple candidates per compiled call.
        idx = 0
        while idx < total_steps:
            chunk_end = min(idx + chunk_size, total_steps)
            current_chunk = chunk_end - idx

            ps = torch.tensor(
                [1.0 - (idx + j) / grid for j in range(current_chunk)],
                dtype=observed.dtype,
                device=observed.device,
            )

            prev_best = best_error.clone()
            best_error, best_min_val, best_max_val = _compute_chunk_compiled(
                observed,
                args,
                token_args,
                min_val,
                max_val,
                ps,
                current_chunk,
                norm,
                global_scale,
                optimize_global_scale,
                best_error,
                best_min_val,
                best_max_val,
            )
            # Chunk-level early stopping: if no channel improved across
            # the entire chunk, increment by chunk size towards patience.
            if torch.equal(prev_best, best_error):
                no_improve_count += current_chunk
                if no_improve_count >= patience:
                    break
            else:
                no_improve_count = 0
            idx = chunk_end
    else:
        # Eager or single-step compile path.
        compute_fn = (
            _compute_candidate_error_compiled
            if enable_compile
            else _compute_candidate_error
        )

        for i in range(total_steps):
            p = 1 - i / grid
            err, shrinked_min_val, shrinked_max_val = compute_fn(
                observed,
                args,
                token_args,
                min_val,
                max_val,
                p,
                norm,
                global_scale,
                optimize_global_scale,
            )

            tmp = err < best_error
            if torch.any(tmp):
                best_error[tmp] = err[tmp]
                best_min_val[tmp] = shrinked_min_val[tmp]
                best_max_val[tmp] = shrinked_max_val[tmp]
                no_improve_count = 0
            else:
                no_improve_count += 1
                if no_improve_count >= patience:
                    break

    return best_min_val, best_max_val


# ----------------------------------------------------------------------------------------------
# Calibration driver (stands in for oneshot + QuantizationModifier: W8A8 int, weights group 16
# with "mse", input activations per-tensor static with "mse", as in the PR's reproduction recipe)
# ----------------------------------------------------------------------------------------------
def main():
    torch.manual_seed(0)
    set_torch_compile(True)  # as in the PR: set_torch_compile(True) before oneshot(...)

    hidden, inter, kv = 64, 128, 32
    layers = {
        "q_proj": torch.nn.Linear(hidden, hidden, bias=False),
        "k_proj": torch.nn.Linear(hidden, kv, bias=False),
        "v_proj": torch.nn.Linear(hidden, kv, bias=False),
        "o_proj": torch.nn.Linear(hidden, hidden, bias=False),
        "gate_proj": torch.nn.Linear(hidden, inter, bias=False),
        "up_proj": torch.nn.Linear(hidden, inter, bias=False),
        "down_proj": torch.nn.Linear(inter, hidden, bias=False),
    }
    weight_args = dict(num_bits=8, type=QuantizationType.INT, symmetric=True,
                       strategy=QuantizationStrategy.GROUP, group_size=16, observer="mse")
    input_args = dict(num_bits=8, type=QuantizationType.INT, symmetric=True,
                      strategy=QuantizationStrategy.TENSOR, observer="mse")

    total = 0.0
    # weights: one memoryless observer per Linear, called once on the weight
    for name, layer in layers.items():
        obs = MemorylessMSEObserver("weight", QuantizationArgs(**weight_args))
        obs(layer.weight.detach())
        qp = obs.get_qparams()
        total += qp["scale"].double().sum().item()

    # input activations: moving-average observers over calibration batches of varying length
    act_obs = {name: MovingAverageMSEObserver("input", QuantizationArgs(**input_args))
               for name in ("q_proj", "down_proj")}
    for seq_len in (24, 40, 33, 57):
        x = torch.randn(1, seq_len, hidden)
        act_obs["q_proj"](x)
        act_obs["down_proj"](torch.relu(layers["gate_proj"](x)).detach() * layers["up_proj"](x).detach())
    for obs in act_obs.values():
        qp = obs.get_qparams()
        total += qp["scale"].double().sum().item() * 100.0

    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {total:.4f}")


if __name__ == "__main__":
    main()
