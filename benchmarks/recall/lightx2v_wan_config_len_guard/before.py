"""LightX2V before 6fb7c136 (PR #1317): WanTransformerInfer reads the shared,
request-mutated runner config (`self.config["seq_parallel"]`,
`self.config.get("use_image_encoder", True)`) inside the per-block
torch.compile region (lightx2v/models/networks/wan/infer/transformer_infer.py).

Trimmed CPU reproduction: the Wan weight modules (MM/LayerNorm/RMSNorm/RoPE/
flash-attention wrappers) are small torch stand-ins with the same `.apply`
interface, the triton modulate kernel is a torch function, the mxfp8 fusion
is unavailable (as on any non-SM120 device), and the HTTP worker / runner are
reduced to the warmup -> `runner.set_config(task_data)` -> denoise sequence.
"""
from contextlib import contextmanager

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# --- lightx2v/utils/lockable_dict.py (trimmed) --------------------------------
class LockableDict(dict):
    def __init__(self, *args, auto_wrap: bool = True, **kwargs):
        self._locked: bool = False
        self._auto_wrap: bool = auto_wrap
        tmp = dict(*args, **kwargs)
        for k, v in tmp.items():
            dict.__setitem__(self, k, self._wrap(v))

    def lock(self, recursive: bool = True) -> None:
        self._locked = True
        if recursive:
            for v in self.values():
                if isinstance(v, LockableDict):
                    v.lock(True)

    @contextmanager
    def temporarily_unlocked(self, recursive: bool = True):
        prev = self._locked
        self._locked = False
        try:
            yield self
        finally:
            self._locked = prev

    def __setitem__(self, key, value) -> None:
        self._ensure_unlocked()
        dict.__setitem__(self, key, self._wrap(value))

    def update(self, other, **kwargs) -> None:
        self._ensure_unlocked()
        items = list(other.items()) if isinstance(other, dict) else list(other)
        for k, v in items:
            dict.__setitem__(self, k, self._wrap(v))
        for k, v in kwargs.items():
            dict.__setitem__(self, k, self._wrap(v))

    def __getattr__(self, key: str):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"'LockableDict' object has no attribute '{key}'")

    def _ensure_unlocked(self) -> None:
        if self._locked:
            raise TypeError("Dictionary is locked, current operation not allowed.")

    def _wrap(self, value):
        if not self._auto_wrap:
            return value
        if isinstance(value, LockableDict):
            return value
        if isinstance(value, dict):
            return LockableDict(value, auto_wrap=True)
        return value


# --- stand-ins for lightx2v ops / kernels --------------------------------------
def GET_DTYPE():
    return torch.float32


def GET_SENSITIVE_DTYPE():
    return torch.float32


def fuse_scale_shift_kernel(x, scale, shift, block_l=128, block_c=128):  # triton_ops.py (torch stand-in)
    if x.dim() == 2:
        x = x.unsqueeze(0)
    return x * (1 + scale) + shift


scaled_mxfp8_modulate_quant = None  # mxfp8_fuse kernels unavailable (non-SM120)
cutlass_scaled_mxfp8_mm = None


class TensorWeight:
    def __init__(self, *shape):
        self.tensor = torch.randn(*shape) * 0.1


class MMWeight:
    def __init__(self, din, dout):
        self.weight = torch.randn(dout, din) * din**-0.5
        self.bias = torch.randn(dout) * 0.01

    def apply(self, x):
        return torch.addmm(self.bias, x, self.weight.t())


class LNWeight:
    def __init__(self, dim):
        self.dim = dim

    def apply(self, x):
        return torch.nn.functional.layer_norm(x, (self.dim,), eps=1e-6)


class RMSWeight:
    def __init__(self, dim):
        self.weight = torch.ones(dim)

    def apply(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class RopeStandIn:
    def apply(self, q, k, cos_sin, positions=None):
        cos, sin = cos_sin
        return q * cos + q.roll(1, -1) * sin, k * cos + k.roll(1, -1) * sin


class FlashAttnStandIn:  # flash_attn varlen wrapper -> sdpa
    def apply(self, q, k, v, cu_seqlens_q=None, cu_seqlens_kv=None, max_seqlen_q=None, max_seqlen_kv=None, **kwds):
        out = torch.nn.functional.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1))
        return out.transpose(0, 1).reshape(q.shape[0], -1)


class Phase:
    pass


class WanTransformerAttentionBlock:
    def __init__(self, dim, ffn_dim):
        p0, p1, p2 = Phase(), Phase(), Phase()
        p0.modulation = TensorWeight(1, 6, dim)
        p0.norm1 = LNWeight(dim)
        p0.self_attn_q, p0.self_attn_k, p0.self_attn_v, p0.self_attn_o = (MMWeight(dim, dim) for _ in range(4))
        p0.self_attn_norm_q, p0.self_attn_norm_k = RMSWeight(dim), RMSWeight(dim)
        p0.rope = RopeStandIn()
        p0.self_attn_1 = FlashAttnStandIn()
        p1.norm3 = LNWeight(dim)
        p1.cross_attn_q, p1.cross_attn_k, p1.cross_attn_v, p1.cross_attn_o = (MMWeight(dim, dim) for _ in range(4))
        p1.cross_attn_norm_q, p1.cross_attn_norm_k = RMSWeight(dim), RMSWeight(dim)
        p1.cross_attn_1 = FlashAttnStandIn()
        p2.norm2 = LNWeight(dim)
        p2.ffn_0 = MMWeight(dim, ffn_dim)
        p2.ffn_2 = MMWeight(ffn_dim, dim)
        self.compute_phases = [p0, p1, p2]


class WanTransformerWeights:
    def __init__(self, config):
        dim = config["dim"]
        self.blocks = [WanTransformerAttentionBlock(dim, config["ffn_dim"]) for _ in range(config["num_layers"])]
        self.head_modulation = TensorWeight(1, 2, dim)
        self.norm = LNWeight(dim)
        self.head = MMWeight(dim, config["out_dim"])


class WanPreInferModuleOutput:
    def __init__(self, **kw):
        self.__dict__.update(kw)


# --- lightx2v/common/transformer_infer/transformer_infer.py --------------------
class BaseTransformerInfer:
    def init_compile(self, config):
        self.use_compile = config.get("use_compile", False)
        self.compiled_blocks = {}

    def get_compiled_block(self, block_idx, block):
        key = self.get_compile_block_key(block_idx, block)
        cached = self.compiled_blocks.get(key)
        if cached is not None and cached[0] is block:
            return cached[1]

        def block_runner(*args):
            return self.infer_block(block, *args)

        compiled = torch.compile(block_runner, dynamic=None, backend=counting_backend)
        self.compiled_blocks[key] = (block, compiled)
        return compiled

    def get_compile_block_key(self, block_idx, block):
        return block_idx

    def run_block(self, block_idx, block, *args):
        if self.use_compile:
            return self.get_compiled_block(block_idx, block)(*args)
        return self.infer_block(block, *args)

    def set_scheduler(self, scheduler):
        self.scheduler = scheduler
        self.scheduler.transformer_infer = self


# --- lightx2v/models/networks/wan/infer/mxfp8_fuse.py (unavailable path) ------
class WanMxfp8FuseMixin:
    def _probe_mxfp8_fuse_availability(self):
        if self.config.get("dit_quant_scheme", "Default") != "mxfp8":
            return False
        return False

    def _use_mxfp8_quant_fuse(self):
        return self.mxfp8_fuse_enable and self._mxfp8_fuse_available

    def _can_use_mxfp8_modulate_quant(self, norm2_out, c_scale_msa, c_shift_msa):
        if scaled_mxfp8_modulate_quant is None:
            return False
        return self._use_mxfp8_quant_fuse()

    def _can_reuse_self_attn_mxfp8_quant(self, phase, norm1_out, scale_msa, shift_msa):
        if cutlass_scaled_mxfp8_mm is None:
            return False
        return self._can_use_mxfp8_modulate_quant(norm1_out, scale_msa, shift_msa)


def modulate(x, scale, shift):
    return x * (1 + scale.squeeze()) + shift.squeeze()


# --- lightx2v/models/networks/wan/infer/transformer_infer.py (before) ---------
class WanTransformerInfer(WanMxfp8FuseMixin, BaseTransformerInfer):
    def __init__(self, config):
        self.config = config
        self.task = config["task"]
        self.blocks_num = config["num_layers"]
        self.phases_num = 3
        self.has_post_adapter = False
        _tp_size = 1
        self.num_heads = config["num_heads"] // _tp_size
        self.head_dim = config["dim"] // config["num_heads"]
        self.window_size = config.get("window_size", (-1, -1))
        self.parallel_attention = None
        if self.config.get("modulate_type", "triton") == "triton":
            self.modulate_func = fuse_scale_shift_kernel
        else:
            self.modulate_func = modulate
        self.clean_cuda_cache = self.config.get("clean_cuda_cache", False)
        self.mxfp8_fuse_enable = self.config.get("mxfp8_fuse_enable", True)
        self.infer_dtype = GET_DTYPE()
        self.sensitive_layer_dtype = GET_SENSITIVE_DTYPE()

        if self.config["seq_parallel"]:
            raise NotImplementedError("sequence parallel is not part of this CPU reproduction")
        else:
            self.seq_p_group = None
            self.seq_p_attn_type = None
            self.seq_p_fp8_comm = False
            self.seq_p_fp4_comm = False
            self.seq_p_head_parallel = False
            self.seq_p_tensor_fusion = False
            self.seq_p_prepost_backend = "torch"
            self.seq_p_a2a_backend = "torch"
            self.seq_p_quant_scheme = None
            self.seq_p_configured_quant_scheme = None
            self.use_new_seq_p_interface = False
        self.infer_func = self.infer_without_offload

        self.cos_sin = None
        self.rope_positions = None
        self.init_compile(config)

        self._mxfp8_fuse_available = self._probe_mxfp8_fuse_availability() if self.mxfp8_fuse_enable else False

    def reset_infer_states(self, x, context):
        query_len = x.shape[0]
        context_len = context.shape[0]
        has_image_context = self.task in ["i2v", "flf2v", "animate", "s2v", "rs2v"] and self.config.get("use_image_encoder", True)

        self.self_attn_cu_seqlens_qkv = torch.tensor([0, query_len], dtype=torch.int32)
        self.cross_attn_cu_seqlens_q = torch.tensor([0, query_len], dtype=torch.int32)
        if has_image_context:
            self.cross_attn_cu_seqlens_kv_img = torch.tensor([0, 257], dtype=torch.int32)
            context_len -= 257
        self.cross_attn_cu_seqlens_kv = torch.tensor([0, context_len], dtype=torch.int32)

    @torch.no_grad()
    def infer(self, weights, pre_infer_out):
        self.cos_sin = pre_infer_out.cos_sin
        self.rope_positions = getattr(pre_infer_out, "rope_positions", None)
        self.reset_infer_states(pre_infer_out.x, pre_infer_out.context)
        x = self.infer_main_blocks(weights.blocks, pre_infer_out)
        return self.infer_non_blocks(weights, x, pre_infer_out.embed)

    def infer_main_blocks(self, blocks, pre_infer_out):
        x = self.infer_func(blocks, pre_infer_out.x, pre_infer_out)
        return x

    def infer_non_blocks(self, weights, x, e):
        modulation = weights.head_modulation.tensor  # 1, 2, dim
        e = (modulation + e.unsqueeze(1)).chunk(2, dim=1)
        x = weights.norm.apply(x)
        x.mul_(1 + e[1].squeeze()).add_(e[0].squeeze())
        x = weights.head.apply(x)
        return x

    def infer_without_offload(self, blocks, x, pre_infer_out):
        for block_idx, block in enumerate(blocks):
            self.block_idx = block_idx
            x = self.run_block(block_idx, block, x, pre_infer_out)
        return x

    def infer_block(self, block, x, pre_infer_out):
        if hasattr(block.compute_phases[0], "before_proj") and block.compute_phases[0].before_proj.weight is not None:
            x = block.compute_phases[0].before_proj.apply(x) + pre_infer_out.x

        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = self.pre_process(
            block.compute_phases[0].modulation,
            pre_infer_out.embed0,
        )
        y_out = self.infer_self_attn(
            block.compute_phases[0],
            x,
            shift_msa,
            scale_msa,
            grid_sizes=pre_infer_out.grid_sizes.tuple if getattr(pre_infer_out, "grid_sizes", None) is not None else None,
        )
        x, attn_out = self.infer_cross_attn(
            block.compute_phases[1],
            x,
            pre_infer_out.context,
            y_out,
            gate_msa,
        )
        y = self.infer_ffn(block.compute_phases[2], x, attn_out, c_shift_msa, c_scale_msa, c_gate_msa)
        x = self.post_process(x, y, c_gate_msa, pre_infer_out)
        if hasattr(block.compute_phases[2], "after_proj"):
            pre_infer_out.adapter_args["hints"].append(block.compute_phases[2].after_proj.apply(x))

        return x

    def pre_process(self, modulation, embed0):
        if embed0.dim() == 3 and embed0.shape[2] == 1:
            modulation = modulation.tensor.unsqueeze(2)
            embed0 = (modulation + embed0).chunk(6, dim=1)
            shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = [ei.squeeze(1) for ei in embed0]
        else:
            shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (modulation.tensor + embed0).chunk(6, dim=1)
        return shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa

    def infer_self_attn(self, phase, x, shift_msa, scale_msa, grid_sizes=None):
        cos_sin = self.cos_sin
        norm1_quant = None
        norm1_scale = None
        norm1_out = phase.norm1.apply(x)
        if self.sensitive_layer_dtype != self.infer_dtype:
            norm1_out = norm1_out.to(self.sensitive_layer_dtype)
        if self._can_reuse_self_attn_mxfp8_quant(phase, norm1_out, scale_msa, shift_msa):
            norm1_quant, norm1_scale = scaled_mxfp8_modulate_quant(norm1_out, scale_msa, shift_msa)
        else:
            norm1_out = self.modulate_func(norm1_out, scale=scale_msa, shift=shift_msa).squeeze()

        if self.sensitive_layer_dtype != self.infer_dtype:
            norm1_out = norm1_out.to(self.infer_dtype)

        s, n, d = *norm1_out.shape[:1], self.num_heads, self.head_dim
        q = phase.self_attn_norm_q.apply(phase.self_attn_q.apply(norm1_out)).view(s, n, d)
        k = phase.self_attn_norm_k.apply(phase.self_attn_k.apply(norm1_out)).view(s, n, d)
        v = phase.self_attn_v.apply(norm1_out).view(s, n, d)
        if self.rope_positions is None:
            q, k = phase.rope.apply(q, k, cos_sin)
        else:
            q, k = phase.rope.apply(q, k, cos_sin, positions=self.rope_positions)
        img_qkv_len = q.shape[0]

        attn_running_args = {
            "block_idx": self.block_idx,
            "scheduler": self.scheduler,
            "grid_sizes": grid_sizes,
        }

        if self.config["seq_parallel"]:
            raise NotImplementedError("sequence parallel is not part of this CPU reproduction")
        else:
            attn_out = phase.self_attn_1.apply(
                q=q,
                k=k,
                v=v,
                cu_seqlens_q=self.self_attn_cu_seqlens_qkv,
                cu_seqlens_kv=self.self_attn_cu_seqlens_qkv,
                max_seqlen_q=img_qkv_len,
                max_seqlen_kv=img_qkv_len,
                **attn_running_args,
            )

        y = phase.self_attn_o.apply(attn_out)
        return y

    def infer_cross_attn(self, phase, x, context, y_out, gate_msa):
        if self.sensitive_layer_dtype != self.infer_dtype:
            x = x.to(self.sensitive_layer_dtype) + y_out.to(self.sensitive_layer_dtype) * gate_msa.squeeze()
        else:
            x.add_(y_out * gate_msa.squeeze())

        norm3_out = phase.norm3.apply(x)
        if self.task in ["i2v", "flf2v", "animate", "s2v", "rs2v"] and self.config.get("use_image_encoder", True):
            context_img = context[:257]
            context = context[257:]
        else:
            context_img = None

        if self.sensitive_layer_dtype != self.infer_dtype:
            context = context.to(self.infer_dtype)
            if self.task in ["i2v", "flf2v", "animate", "s2v", "rs2v"] and self.config.get("use_image_encoder", True):
                context_img = context_img.to(self.infer_dtype)

        n, d = self.num_heads, self.head_dim
        q = phase.cross_attn_norm_q.apply(phase.cross_attn_q.apply(norm3_out)).view(-1, n, d)
        k = phase.cross_attn_norm_k.apply(phase.cross_attn_k.apply(context)).view(-1, n, d)
        v = phase.cross_attn_v.apply(context).view(-1, n, d)

        attn_out = phase.cross_attn_1.apply(
            q=q,
            k=k,
            v=v,
            cu_seqlens_q=self.cross_attn_cu_seqlens_q,
            cu_seqlens_kv=self.cross_attn_cu_seqlens_kv,
            max_seqlen_q=q.size(0),
            max_seqlen_kv=k.size(0),
        )

        if self.task in ["i2v", "flf2v", "animate", "s2v", "rs2v"] and self.config.get("use_image_encoder", True) and context_img is not None:
            raise NotImplementedError("image context is not part of this CPU reproduction")

        attn_out = phase.cross_attn_o.apply(attn_out)
        return x, attn_out

    def infer_ffn(self, phase, x, attn_out, c_shift_msa, c_scale_msa, c_gate_msa=None):
        x.add_(attn_out)

        norm2_out = phase.norm2.apply(x)
        if self.sensitive_layer_dtype != self.infer_dtype:
            norm2_out = norm2_out.to(self.sensitive_layer_dtype)
        if self._can_use_mxfp8_modulate_quant(norm2_out, c_scale_msa, c_shift_msa):
            raise NotImplementedError
        else:
            norm2_out = self.modulate_func(norm2_out, scale=c_scale_msa, shift=c_shift_msa).squeeze()

        if self.sensitive_layer_dtype != self.infer_dtype:
            norm2_out = norm2_out.to(self.infer_dtype)

        y = phase.ffn_0.apply(norm2_out)
        y = torch.nn.functional.gelu(y, approximate="tanh")
        y = phase.ffn_2.apply(y)
        return y

    def post_process(self, x, y, c_gate_msa, pre_infer_out=None):
        if y is None:
            return x
        if self.sensitive_layer_dtype != self.infer_dtype:
            x = x.to(self.sensitive_layer_dtype) + y.to(self.sensitive_layer_dtype) * c_gate_msa.squeeze()
        else:
            x.add_(y * c_gate_msa.squeeze())
        return x


# --- scheduler / model / runner (reduced) --------------------------------------
class WanScheduler:
    def __init__(self, config):
        self.config = config
        self.infer_steps = config["infer_steps"]
        self.sample_guide_scale = config["sample_guide_scale"]

    def prepare(self, seed, latent_shape):
        g = torch.Generator().manual_seed(seed)
        self.latents = torch.randn(*latent_shape, generator=g)
        self.step_index = 0

    def step_pre(self, step_index):
        self.step_index = step_index
        self.timestep = 1.0 - step_index / self.infer_steps

    def step_post(self):
        self.latents = self.latents - self.noise_pred / self.infer_steps


class WanModel:
    def __init__(self, config, scheduler):
        self.config = config
        self.scheduler = scheduler
        dim = config["dim"]
        self.patch = MMWeight(config["in_dim"], dim)
        self.time_proj = MMWeight(1, dim)
        self.time_proj0 = MMWeight(1, 6 * dim)
        self.transformer_weights = WanTransformerWeights(config)
        self.transformer_infer = WanTransformerInfer(config)
        self.transformer_infer.set_scheduler(scheduler)

    def pre_infer(self, inputs):
        latents = self.scheduler.latents
        x = self.patch.apply(latents)
        t = torch.full((1, 1), self.scheduler.timestep)
        embed = self.time_proj.apply(t)
        embed0 = self.time_proj0.apply(t).unflatten(1, (6, self.config["dim"]))
        seq = x.shape[0]
        pos = torch.arange(seq, dtype=torch.float32)[:, None, None] / seq
        cos_sin = (torch.cos(pos), torch.sin(pos) * 0.1)
        return WanPreInferModuleOutput(x=x, embed=embed, embed0=embed0, context=inputs["text_encoder_output"],
                                       cos_sin=cos_sin, grid_sizes=None, adapter_args={})

    @torch.no_grad()
    def infer(self, inputs):
        out = self.transformer_infer.infer(self.transformer_weights, self.pre_infer(inputs))
        self.scheduler.noise_pred = out


class WanRunner:
    def __init__(self, config):
        self.config = config
        self.scheduler = WanScheduler(config)
        self.model = WanModel(config, self.scheduler)

    def set_config(self, config_modify):  # DefaultRunner.set_config
        with self.config.temporarily_unlocked():
            self.config.update(config_modify)

    def run_segment(self, inputs):
        for step_index in range(self.scheduler.infer_steps):
            self.scheduler.step_pre(step_index=step_index)
            self.model.infer(inputs)
            self.scheduler.step_post()
        return self.scheduler.latents

    def warmup(self, inputs, latent_shape):  # WanRunner._run_warmup, one resolution, step 0
        self.scheduler.prepare(seed=42, latent_shape=latent_shape)
        self.scheduler.step_pre(step_index=0)
        self.model.infer(inputs)
        self.scheduler.step_post()


torch.manual_seed(0)
config = LockableDict({
    "task": "t2v", "model_cls": "wan2.1", "num_layers": 3, "dim": 32, "ffn_dim": 64, "num_heads": 2,
    "in_dim": 16, "out_dim": 16, "seq_parallel": False, "parallel": False, "use_compile": True,
    "infer_steps": 3, "sample_guide_scale": 5.0, "target_video_length": 81,
})
config.lock()
runner = WanRunner(config)
latent_shape = (24, 16)
text_encoder_output = torch.randn(8, 32)
inputs = {"text_encoder_output": text_encoder_output}
runner.warmup(inputs, latent_shape)  # server --warmup, before the first request

out = 0.0
for task_id in range(2):  # HTTP requests: worker.process_request -> runner.set_config(task_data)
    task_data = {"task_id": f"task-{task_id}", "prompt": "a cat", "negative_prompt": "",
                 "save_result_path": f"/tmp/out_{task_id}.mp4", "return_result_tensor": False, "task": "t2v"}
    runner.set_config(task_data)
    runner.scheduler.prepare(seed=task_id, latent_shape=latent_shape)
    out += runner.run_segment(inputs).sum().item()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
