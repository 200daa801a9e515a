"""LTX-2 (ltx-core) compiled transformer blocks after 63fd9a4 (Automated PR
2026-07-07), reduced to CPU.

Fix: BatchedPerturbationConfig precomputes a (type, block, sample) keep-mask
tensor eagerly; the compiled path's CompiledBlockPerturbationsProcessor
attaches both masks unconditionally and pins the skip flags False, so every
block / pass traces the same graph.
"""
from dataclasses import dataclass, field, replace
from enum import Enum, IntEnum
from typing import Any

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- ltx_core/guidance/perturbations.py (verbatim) -------------------------
class PerturbationType(IntEnum):
    """Types of attention perturbations for STG (Spatio-Temporal Guidance).
    The integer value is the row index into ``BatchedPerturbationConfig._block_masks`` dim 0.
    """

    SKIP_VIDEO_SELF_ATTN = 0
    SKIP_AUDIO_SELF_ATTN = 1
    SKIP_A2V_CROSS_ATTN = 2
    SKIP_V2A_CROSS_ATTN = 3


@dataclass(frozen=True)
class Perturbation:
    """A single perturbation specifying which attention type to skip and in which blocks."""

    type: PerturbationType
    blocks: list[int] | None  # None means all blocks

    def is_perturbed(self, perturbation_type: PerturbationType, block: int) -> bool:
        if self.type != perturbation_type:
            return False

        if self.blocks is None:
            return True

        return block in self.blocks


@dataclass(frozen=True)
class PerturbationConfig:
    """Configuration holding a list of perturbations for a single sample."""

    perturbations: list[Perturbation] | None

    def is_perturbed(self, perturbation_type: PerturbationType, block: int) -> bool:
        if self.perturbations is None:
            return False

        return any(perturbation.is_perturbed(perturbation_type, block) for perturbation in self.perturbations)

    @staticmethod
    def empty() -> "PerturbationConfig":
        return PerturbationConfig([])


class BatchedPerturbationConfig:
    """Per-block attention keep-masks for a batch, built once from a list of per-sample configs."""

    _block_masks: torch.Tensor  # keep-mask on the compute device, indexed [PerturbationType, block, sample]
    _block_masks_cpu: torch.Tensor | None

    def __init__(self, perturbations: list[PerturbationConfig], num_blocks: int, device=None,
                 dtype: torch.dtype | None = None) -> None:
        keep = [
            [
                [not pc.is_perturbed(PerturbationType(direction), block) for pc in perturbations]
                for block in range(num_blocks)
            ]
            for direction in range(len(PerturbationType))
        ]
        self._block_masks_cpu = torch.tensor(keep, dtype=dtype, device="cpu")
        self._block_masks = self._block_masks_cpu if device is None else self._block_masks_cpu.to(device)

    def mask(self, perturbation_type: PerturbationType, block: int) -> torch.Tensor:
        return self._block_masks[perturbation_type, block].reshape(-1, 1, 1).clone()

    def any_in_batch(self, perturbation_type: PerturbationType, block: int) -> bool:
        assert self._block_masks_cpu is not None, "host mirror required by the skip-shortcut processor path"
        return bool((self._block_masks_cpu[perturbation_type, block] == 0).any())

    def all_in_batch(self, perturbation_type: PerturbationType, block: int) -> bool:
        assert self._block_masks_cpu is not None, "host mirror required by the skip-shortcut processor path"
        return bool((self._block_masks_cpu[perturbation_type, block] == 0).all())

    @staticmethod
    def empty(batch_size: int, num_blocks: int, device=None, dtype: torch.dtype | None = None) -> "BatchedPerturbationConfig":
        return BatchedPerturbationConfig(
            [PerturbationConfig.empty() for _ in range(batch_size)], num_blocks, device, dtype
        )


# ---- ltx_core/model/transformer/transformer_args.py (verbatim) -------------
@dataclass(frozen=True)
class TransformerArgs:
    x: torch.Tensor
    context: torch.Tensor
    context_mask: torch.Tensor
    timesteps: torch.Tensor
    embedded_timestep: torch.Tensor
    positional_embeddings: tuple[torch.Tensor, torch.Tensor]
    cross_positional_embeddings: tuple[torch.Tensor, torch.Tensor] | None
    cross_scale_shift_timestep: torch.Tensor | None
    cross_gate_timestep: torch.Tensor | None
    enabled: bool
    prompt_timestep: torch.Tensor | None = None
    self_attention_mask: torch.Tensor | None = None
    self_attn_perturbation_mask: torch.Tensor | None = None
    self_attn_all_perturbed: bool = False
    cross_attn_perturbation_mask: torch.Tensor | None = None
    cross_attn_skip_all: bool = False


class BlockPerturbationsProcessor:
    def __call__(
        self,
        args: "TransformerArgs",
        perturbations: BatchedPerturbationConfig,
        block_idx: int,
        self_attn_type: PerturbationType,
        cross_attn_type: PerturbationType,
    ) -> "TransformerArgs":
        all_self = perturbations.all_in_batch(self_attn_type, block_idx)
        any_self = perturbations.any_in_batch(self_attn_type, block_idx)
        self_mask: torch.Tensor | None = None
        if any_self and not all_self:
            self_mask = perturbations.mask(self_attn_type, block_idx)

        all_cross = perturbations.all_in_batch(cross_attn_type, block_idx)
        cross_mask: torch.Tensor | None = None
        if not all_cross:
            cross_mask = perturbations.mask(cross_attn_type, block_idx)

        return replace(
            args,
            self_attn_perturbation_mask=self_mask,
            self_attn_all_perturbed=all_self,
            cross_attn_perturbation_mask=cross_mask,
            cross_attn_skip_all=all_cross,
        )


# ---- ltx_core utils / rope / ops (verbatim; einops.rearrange -> view stand-in)
def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight=weight, eps=eps)


class LTXRopeType(Enum):
    INTERLEAVED = "interleaved"
    SPLIT = "split"


def apply_interleaved_rotary_emb(input_tensor, cos_freqs, sin_freqs):
    t_dup = input_tensor.unflatten(-1, (-1, 2))  # rearrange(.., "... (d r) -> ... d r", r=2)
    t1, t2 = t_dup.unbind(dim=-1)
    t_dup = torch.stack((-t2, t1), dim=-1)
    input_tensor_rot = t_dup.flatten(-2)  # rearrange(t_dup, "... d r -> ... (d r)")
    out = input_tensor * cos_freqs + input_tensor_rot * sin_freqs
    return out


def apply_rotary_emb(input_tensor, freqs_cis, rope_type=LTXRopeType.SPLIT):
    if rope_type == LTXRopeType.INTERLEAVED:
        return apply_interleaved_rotary_emb(input_tensor, *freqs_cis)
    raise NotImplementedError("SPLIT rope not reproduced")  # stand-in: only INTERLEAVED kept


class PytorchPreAttention:
    def __call__(self, q, k, attn_module, mask, pe, k_pe):
        q = attn_module.q_norm(q)
        k = attn_module.k_norm(k)
        if pe is not None:
            q = apply_rotary_emb(q, pe, attn_module.rope_type)
            k = apply_rotary_emb(k, pe if k_pe is None else k_pe, attn_module.rope_type)
        return q, k


class PytorchAdaZeroFunction:
    def __call__(self, x, eps, scale, shift):
        return rms_norm(x, eps=eps) * (1 + scale) + shift


class PytorchPostSAFunction:
    def __call__(self, x, y, norm_weights, eps, gate):
        x_fma = x + y * gate
        return x_fma, rms_norm(x_fma, norm_weights, eps=eps)


class PytorchAttention:
    def __call__(self, q, k, v, heads, mask=None):
        b, _, dim_head = q.shape
        dim_head //= heads
        q, k, v = (t.view(b, -1, heads, dim_head).transpose(1, 2) for t in (q, k, v))

        if mask is not None:
            if mask.ndim == 2:
                mask = mask.unsqueeze(0)
            if mask.ndim == 3:
                mask = mask.unsqueeze(1)

        # real: wrapped in `with sdpa_kernel(self._priority, set_priority=True):`
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False
        )
        out = out.transpose(1, 2).reshape(b, -1, heads * dim_head)
        return out


class Attention(torch.nn.Module):
    def __init__(self, query_dim, context_dim=None, heads=8, dim_head=64, norm_eps=1e-6,
                 rope_type=LTXRopeType.INTERLEAVED):
        super().__init__()
        self.rope_type = rope_type
        self.attention_function = PytorchAttention()
        self.masked_attention_function = PytorchAttention()
        self.preattention_function = PytorchPreAttention()
        self.gated_attention_function = None
        inner_dim = dim_head * heads
        context_dim = query_dim if context_dim is None else context_dim
        self.heads = heads
        self.dim_head = dim_head
        self.q_norm = torch.nn.RMSNorm(inner_dim, eps=norm_eps)
        self.k_norm = torch.nn.RMSNorm(inner_dim, eps=norm_eps)
        self.to_q = torch.nn.Linear(query_dim, inner_dim, bias=True)
        self.to_k = torch.nn.Linear(context_dim, inner_dim, bias=True)
        self.to_v = torch.nn.Linear(context_dim, inner_dim, bias=True)
        self.to_gate_logits = None
        self.to_out = torch.nn.Sequential(torch.nn.Linear(inner_dim, query_dim, bias=True), torch.nn.Identity())

    def forward(self, x, context=None, mask=None, pe=None, k_pe=None, perturbation_mask=None, all_perturbed=False):
        context = x if context is None else context
        use_attention = not all_perturbed

        v = self.to_v(context)

        if not use_attention:
            out = v
        else:
            q = self.to_q(x)
            k = self.to_k(context)
            q, k = self.preattention_function(q, k, self, mask, pe, k_pe)
            if mask is None:
                out = self.attention_function(q, k, v, self.heads)  # (B, T, H*D)
            else:
                out = self.masked_attention_function(q, k, v, self.heads, mask)

            if perturbation_mask is not None:
                out = out * perturbation_mask + v * (1 - perturbation_mask)

        # Apply per-head gating if enabled
        if self.to_gate_logits is not None:
            out = self.gated_attention_function(x, out, self)

        return self.to_out(out)


class FeedForward(torch.nn.Module):  # GELUApprox(dim, inner) -> Identity -> Linear
    def __init__(self, dim, dim_out, mult=4):
        super().__init__()
        inner_dim = int(dim * mult)
        self.net = torch.nn.Sequential(torch.nn.Linear(dim, inner_dim), torch.nn.GELU(approximate="tanh"),
                                       torch.nn.Identity(), torch.nn.Linear(inner_dim, dim_out))

    def forward(self, x):
        return self.net(x)


# ---- ltx_core/model/transformer/transformer.py (video-only init; forward verbatim)
class BasicAVTransformerBlock(torch.nn.Module):
    def __init__(self, dim, heads, d_head, context_dim, norm_eps=1e-6):
        super().__init__()
        self.ada_zero_function = PytorchAdaZeroFunction()
        self.post_sa_function = PytorchPostSAFunction()
        self.attn1 = Attention(query_dim=dim, heads=heads, dim_head=d_head, context_dim=None, norm_eps=norm_eps)
        self.attn2 = Attention(query_dim=dim, context_dim=context_dim, heads=heads, dim_head=d_head, norm_eps=norm_eps)
        self.ff = FeedForward(dim, dim_out=dim)
        self.scale_shift_table = torch.nn.Parameter(torch.randn(6, dim) * 0.1)  # adaln_embedding_coefficient(False)
        self.cross_attention_adaln = False
        self.norm_eps = norm_eps

    def get_ada_values(self, scale_shift_table, batch_size, timestep, indices):
        num_ada_params = scale_shift_table.shape[0]

        ada_values = (
            scale_shift_table[indices].unsqueeze(0).unsqueeze(0).to(device=timestep.device, dtype=timestep.dtype)
            + timestep.reshape(batch_size, timestep.shape[1], num_ada_params, -1)[:, :, indices, :]
        ).unbind(dim=2)
        return ada_values

    def _apply_text_cross_attention(self, x_normed, context, attn, scale_shift_table, prompt_scale_shift_table,
                                    timestep, prompt_timestep, context_mask, cross_attention_adaln=False):
        if cross_attention_adaln:
            raise NotImplementedError  # apply_cross_attention_adaln not reproduced
        return attn(x_normed, context=context, mask=context_mask)

    def forward(self, video, audio):  # noqa: PLR0915  (audio / A-V branches kept verbatim, not taken)
        if video is None and audio is None:
            raise ValueError("At least one of video or audio must be provided")

        vx = video.x if video is not None else None
        ax = audio.x if audio is not None else None

        run_vx = video is not None and video.enabled and vx.numel() > 0
        run_ax = audio is not None and audio.enabled and ax.numel() > 0

        run_a2v = run_vx and (audio is not None and ax.numel() > 0)
        run_v2a = run_ax and (video is not None and vx.numel() > 0)

        if run_vx:
            vshift_msa, vscale_msa, vgate_msa = self.get_ada_values(
                self.scale_shift_table, vx.shape[0], video.timesteps, slice(0, 3)
            )
            norm_vx = self.ada_zero_function(vx, self.norm_eps, vscale_msa, vshift_msa)
            del vshift_msa, vscale_msa

            vx_msa_out = self.attn1(
                norm_vx,
                pe=video.positional_embeddings,
                mask=video.self_attention_mask,
                perturbation_mask=video.self_attn_perturbation_mask,
                all_perturbed=video.self_attn_all_perturbed,
            )
            vx, vx_normed = self.post_sa_function(vx, vx_msa_out, None, self.norm_eps, vgate_msa)
            del vgate_msa, norm_vx, vx_msa_out
            vx = vx + self._apply_text_cross_attention(
                vx_normed,
                video.context,
                self.attn2,
                self.scale_shift_table,
                getattr(self, "prompt_scale_shift_table", None),
                video.timesteps,
                video.prompt_timestep,
                video.context_mask,
                cross_attention_adaln=self.cross_attention_adaln,
            )
            del vx_normed

        if run_ax or run_a2v or run_v2a:
            raise NotImplementedError  # audio and audio<->video branches not reproduced (video-only model)

        if run_vx:
            vshift_mlp, vscale_mlp, vgate_mlp = self.get_ada_values(
                self.scale_shift_table, vx.shape[0], video.timesteps, slice(3, 6)
            )
            vx_scaled = self.ada_zero_function(vx, self.norm_eps, vscale_mlp, vshift_mlp)
            vx = vx + self.ff(vx_scaled) * vgate_mlp

            del vshift_mlp, vscale_mlp, vgate_mlp, vx_scaled

        return replace(video, x=vx) if video is not None else None, replace(audio, x=ax) if audio is not None else None


# ---- ltx_core/model/transformer/model.py (LTXModel, reduced) ---------------
class LTXModel(torch.nn.Module):
    def __init__(self, num_layers, dim, heads, d_head, context_dim):
        super().__init__()
        self.transformer_blocks = torch.nn.ModuleList(
            [BasicAVTransformerBlock(dim, heads, d_head, context_dim) for _ in range(num_layers)]
        )
        self.block_input_processor = BlockPerturbationsProcessor()
        self._enable_gradient_checkpointing = False

    @property
    def num_blocks(self) -> int:
        """Number of transformer blocks."""
        return len(self.transformer_blocks)

    def _process_transformer_blocks(self, video, audio, perturbations):
        for block_idx, block in enumerate(self.transformer_blocks):
            if video is not None:
                video = self.block_input_processor(
                    video,
                    perturbations,
                    block_idx,
                    self_attn_type=PerturbationType.SKIP_VIDEO_SELF_ATTN,
                    cross_attn_type=PerturbationType.SKIP_A2V_CROSS_ATTN,
                )
            if audio is not None:
                audio = self.block_input_processor(
                    audio,
                    perturbations,
                    block_idx,
                    self_attn_type=PerturbationType.SKIP_AUDIO_SELF_ATTN,
                    cross_attn_type=PerturbationType.SKIP_V2A_CROSS_ATTN,
                )

            if self._enable_gradient_checkpointing and self.training:
                video, audio = torch.utils.checkpoint.checkpoint(block, video, audio, use_reentrant=False)
            else:
                video, audio = block(video=video, audio=audio)

        return video, audio

    def forward(self, video_args, audio_args, perturbations):
        # real: builds video_args via video_args_preprocessor.prepare(Modality); here passed in directly
        # Materialize the no-perturbation mask here (eager); a None config means "perturb nothing"
        # -> all-keep masks. The block loop never builds masks.
        if perturbations is None:
            ref = (video_args or audio_args).x
            perturbations = BatchedPerturbationConfig.empty(ref.shape[0], self.num_blocks, ref.device, ref.dtype)
        video_out, audio_out = self._process_transformer_blocks(
            video=video_args, audio=audio_args, perturbations=perturbations
        )
        return video_out.x  # real: _process_output(norm_out, proj_out)


# ---- ltx_core/model/transformer/compiling.py (verbatim) --------------------
_DEFAULT_INDUCTOR_CONFIG: dict[str, Any] = {}
_DEFAULT_DYNAMO_CONFIG: dict[str, Any] = {"inline_inbuilt_nn_modules": True, "cache_size_limit": 256}


@dataclass(frozen=True)
class CompilationConfig:
    mode: str | None = None
    backend: Any = "inductor"
    fullgraph: bool = False
    dynamic: bool | None = None
    inductor_config: dict[str, Any] = field(default_factory=lambda: dict(_DEFAULT_INDUCTOR_CONFIG))
    dynamo_config: dict[str, Any] = field(default_factory=lambda: dict(_DEFAULT_DYNAMO_CONFIG))


class CompiledBlockPerturbationsProcessor(BlockPerturbationsProcessor):
    def __call__(self, args, perturbations, block_idx, self_attn_type, cross_attn_type):
        torch._dynamo.mark_dynamic(args.x, 1)
        cos, sin = args.positional_embeddings
        torch._dynamo.mark_dynamic(cos, cos.ndim - 2)
        torch._dynamo.mark_dynamic(sin, sin.ndim - 2)
        if args.cross_positional_embeddings is not None:
            cross_cos, cross_sin = args.cross_positional_embeddings
            torch._dynamo.mark_dynamic(cross_cos, cross_cos.ndim - 2)
            torch._dynamo.mark_dynamic(cross_sin, cross_sin.ndim - 2)
        if args.self_attention_mask is not None:
            if args.self_attention_mask.shape[2] > 1:
                torch._dynamo.mark_dynamic(args.self_attention_mask, 2)
            torch._dynamo.mark_dynamic(args.self_attention_mask, 3)
        if args.context_mask is not None:
            torch._dynamo.mark_dynamic(args.context_mask, 2)
        if args.timesteps.shape[1] > 1:
            torch._dynamo.mark_dynamic(args.timesteps, 1)
        if args.embedded_timestep.shape[1] > 1:
            torch._dynamo.mark_dynamic(args.embedded_timestep, 1)
        if args.cross_scale_shift_timestep is not None and args.cross_scale_shift_timestep.shape[1] > 1:
            torch._dynamo.mark_dynamic(args.cross_scale_shift_timestep, 1)
        # Perturbation as config-independent runtime masks (skip flags pinned False -> no recompile).
        return replace(
            args,
            self_attn_perturbation_mask=perturbations.mask(self_attn_type, block_idx),
            self_attn_all_perturbed=False,
            cross_attn_perturbation_mask=perturbations.mask(cross_attn_type, block_idx),
            cross_attn_skip_all=False,
        )


def compile_transformer(model: LTXModel, config: CompilationConfig) -> LTXModel:
    model.transformer_blocks = torch.nn.ModuleList(
        torch.compile(m, mode=config.mode, backend=config.backend, fullgraph=config.fullgraph, dynamic=config.dynamic)
        for m in model.transformer_blocks
    )
    model.block_input_processor = CompiledBlockPerturbationsProcessor()

    def patched_dynamo_forward(*args, **kwargs):
        torch.compiler.cudagraph_mark_step_begin()
        with (
            torch._inductor.config.patch(**config.inductor_config),
            torch._dynamo.config.patch(**config.dynamo_config),  # type: ignore[attr-defined]
        ):
            return model.forward_without_compilation(*args, **kwargs)

    model.forward_without_compilation = model.forward
    model.forward = patched_dynamo_forward
    return model


# ---- driver: ltx_pipelines/utils/denoisers.py batched guidance passes -------
NUM_BLOCKS, DIM, HEADS, D_HEAD, CTX_DIM = 4, 32, 2, 16, 32
STG_BLOCKS = [2]  # video_guider.params.stg_blocks
torch.manual_seed(0)
model = LTXModel(NUM_BLOCKS, DIM, HEADS, D_HEAD, CTX_DIM)
model = compile_transformer(model, CompilationConfig(backend=counting_backend))  # real backend: "inductor"

passes = [
    ("cond", PerturbationConfig.empty()),
    ("uncond", PerturbationConfig.empty()),
    ("ptb", PerturbationConfig([Perturbation(type=PerturbationType.SKIP_VIDEO_SELF_ATTN, blocks=STG_BLOCKS)])),
]
n, T, S = len(passes), 24, 8
orig_b = 1
batched_ptb_configs = [ptb for _, ptb in passes for _ in range(orig_b)]

latent = torch.randn(1, T, DIM)
checksum = 0.0
with torch.no_grad():
    for step in range(3):
        sigma = 1.0 - step / 3
        x = latent.repeat(n, 1, 1)
        angles = torch.arange(T).float()[:, None] * torch.arange(DIM).float()[None, :] * 0.01
        pe = (angles.cos().expand(n, T, DIM).contiguous(), angles.sin().expand(n, T, DIM).contiguous())
        video_args = TransformerArgs(
            x=x,
            context=torch.randn(n, S, CTX_DIM),
            context_mask=None,
            timesteps=torch.full((n, 1, 6 * DIM), sigma),
            embedded_timestep=torch.full((n, 1, DIM), sigma),
            positional_embeddings=pe,
            cross_positional_embeddings=None,
            cross_scale_shift_timestep=None,
            cross_gate_timestep=None,
            enabled=True,
        )
        perturbations = BatchedPerturbationConfig(
            batched_ptb_configs, num_blocks=NUM_BLOCKS, device=x.device, dtype=x.dtype  # transformer.num_blocks
        )
        all_v = model(video_args, None, perturbations=perturbations)
        cond_v, uncond_v, ptb_v = all_v.chunk(n)
        denoised = cond_v + 2.0 * (cond_v - uncond_v) + 1.0 * (cond_v - ptb_v)  # guider.calculate stand-in
        latent = latent - 0.1 * denoised
        checksum += float(denoised.sum())

print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
