"""diffusion-pipe models/chroma.py after 6b6cc5e ("Get torch.compile working
with Chroma"), reduced to CPU. Fix: the idx-keyed modulation lookup moved into
a @torch.compiler.disable'd _get_mods() method.

`pipeline_model.compile()` compiles every TransformerWrapper /
SingleTransformerWrapper with nn.Module.compile(): all wrappers of a class
share one code object. Each forward looks up its modulation slices with
modulation_distribute_dict[f"double_blocks.{self.idx}..."] inside the compiled
region, so the graph specialises on self.idx -> one recompile per block.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


AUTOCAST_DTYPE = None  # utils/common.py (set from config at runtime)


# ---- models/base.py (verbatim) ---------------------------------------------
def make_contiguous(*tensors):
    return tuple(x.contiguous() for x in tensors)


# ---- submodules/flow src/models/chroma/math.py (rearrange -> reshape/permute stand-ins)
def attention(q: Tensor, k: Tensor, v: Tensor, pe: Tensor, mask: Tensor) -> Tensor:
    q, k = apply_rope(q, k, pe)

    # mask should have shape [B, H, L, D]
    x = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    B, H, L, D = x.shape
    x = x.permute(0, 2, 1, 3).reshape(B, L, H * D)  # rearrange(x, "B H L D -> B L (H D)")

    return x


def apply_rope(xq: Tensor, xk: Tensor, freqs_cis: Tensor) -> tuple[Tensor, Tensor]:
    xq_ = xq.float().reshape(*xq.shape[:-1], -1, 1, 2)
    xk_ = xk.float().reshape(*xk.shape[:-1], -1, 1, 2)
    xq_out = freqs_cis[..., 0] * xq_[..., 0] + freqs_cis[..., 1] * xq_[..., 1]
    xk_out = freqs_cis[..., 0] * xk_[..., 0] + freqs_cis[..., 1] * xk_[..., 1]
    return xq_out.reshape(*xq.shape).type_as(xq), xk_out.reshape(*xk.shape).type_as(xk)


def split_qkv(qkv, H):  # stand-in for rearrange(qkv, "B L (K H D) -> K B H L D", K=3, H=H)
    B, L, C = qkv.shape
    return qkv.reshape(B, L, 3, H, C // (3 * H)).permute(2, 0, 3, 1, 4)


# ---- submodules/flow src/models/chroma/module/layers.py (verbatim, use_compiled=False)
class RMSNorm(torch.nn.Module):
    def __init__(self, dim: int, use_compiled: bool = False):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))
        self.use_compiled = use_compiled

    def forward(self, x: Tensor):
        return F.rms_norm(x, self.scale.shape, weight=self.scale, eps=1e-6)


class QKNorm(torch.nn.Module):
    def __init__(self, dim: int, use_compiled: bool = False):
        super().__init__()
        self.query_norm = RMSNorm(dim, use_compiled=use_compiled)
        self.key_norm = RMSNorm(dim, use_compiled=use_compiled)
        self.use_compiled = use_compiled

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        q = self.query_norm(q)
        k = self.key_norm(k)
        return q.to(v), k.to(v)


class SelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = False, use_compiled: bool = False):
        super().__init__()
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.norm = QKNorm(head_dim, use_compiled=use_compiled)
        self.proj = nn.Linear(dim, dim)
        self.use_compiled = use_compiled


@dataclass
class ModulationOut:
    shift: Tensor
    scale: Tensor
    gate: Tensor


def _modulation_shift_scale_fn(x, scale, shift):
    return (1 + scale) * x + shift


def _modulation_gate_fn(x, gate, gate_params):
    return x + gate * gate_params


class DoubleStreamBlock(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, mlp_ratio: float, qkv_bias: bool = False, use_compiled: bool = False):
        super().__init__()
        mlp_hidden_dim = int(hidden_size * mlp_ratio)
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.img_norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.img_attn = SelfAttention(dim=hidden_size, num_heads=num_heads, qkv_bias=qkv_bias, use_compiled=use_compiled)
        self.img_norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.img_mlp = nn.Sequential(
            nn.Linear(hidden_size, mlp_hidden_dim, bias=True),
            nn.GELU(approximate="tanh"),
            nn.Linear(mlp_hidden_dim, hidden_size, bias=True),
        )
        self.txt_norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.txt_attn = SelfAttention(dim=hidden_size, num_heads=num_heads, qkv_bias=qkv_bias, use_compiled=use_compiled)
        self.txt_norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.txt_mlp = nn.Sequential(
            nn.Linear(hidden_size, mlp_hidden_dim, bias=True),
            nn.GELU(approximate="tanh"),
            nn.Linear(mlp_hidden_dim, hidden_size, bias=True),
        )
        self.use_compiled = use_compiled

    def modulation_shift_scale_fn(self, x, scale, shift):
        if self.use_compiled:
            return torch.compile(_modulation_shift_scale_fn)(x, scale, shift)
        else:
            return _modulation_shift_scale_fn(x, scale, shift)

    def modulation_gate_fn(self, x, gate, gate_params):
        if self.use_compiled:
            return torch.compile(_modulation_gate_fn)(x, gate, gate_params)
        else:
            return _modulation_gate_fn(x, gate, gate_params)

    def forward(self, img: Tensor, txt: Tensor, pe: Tensor, distill_vec: list[ModulationOut], mask: Tensor) -> tuple[Tensor, Tensor]:
        (img_mod1, img_mod2), (txt_mod1, txt_mod2) = distill_vec

        # prepare image for attention
        img_modulated = self.img_norm1(img)
        img_modulated = self.modulation_shift_scale_fn(
            img_modulated, img_mod1.scale, img_mod1.shift
        )
        img_qkv = self.img_attn.qkv(img_modulated)
        img_q, img_k, img_v = split_qkv(img_qkv, self.num_heads)
        img_q, img_k = self.img_attn.norm(img_q, img_k, img_v)

        # prepare txt for attention
        txt_modulated = self.txt_norm1(txt)
        txt_modulated = self.modulation_shift_scale_fn(
            txt_modulated, txt_mod1.scale, txt_mod1.shift
        )
        txt_qkv = self.txt_attn.qkv(txt_modulated)
        txt_q, txt_k, txt_v = split_qkv(txt_qkv, self.num_heads)
        txt_q, txt_k = self.txt_attn.norm(txt_q, txt_k, txt_v)

        # run actual attention
        q = torch.cat((txt_q, img_q), dim=2)
        k = torch.cat((txt_k, img_k), dim=2)
        v = torch.cat((txt_v, img_v), dim=2)

        attn = attention(q, k, v, pe=pe, mask=mask)
        txt_attn, img_attn = attn[:, : txt.shape[1]], attn[:, txt.shape[1] :]

        img = self.modulation_gate_fn(img, img_mod1.gate, self.img_attn.proj(img_attn))
        img = self.modulation_gate_fn(
            img,
            img_mod2.gate,
            self.img_mlp(
                self.modulation_shift_scale_fn(
                    self.img_norm2(img), img_mod2.scale, img_mod2.shift
                )
            ),
        )

        txt = self.modulation_gate_fn(txt, txt_mod1.gate, self.txt_attn.proj(txt_attn))
        txt = self.modulation_gate_fn(
            txt,
            txt_mod2.gate,
            self.txt_mlp(
                self.modulation_shift_scale_fn(
                    self.txt_norm2(txt), txt_mod2.scale, txt_mod2.shift
                )
            ),
        )

        return img, txt


class SingleStreamBlock(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, mlp_ratio: float = 4.0, qk_scale: float | None = None, use_compiled: bool = False):
        super().__init__()
        self.hidden_dim = hidden_size
        self.num_heads = num_heads
        head_dim = hidden_size // num_heads
        self.scale = qk_scale or head_dim**-0.5
        self.mlp_hidden_dim = int(hidden_size * mlp_ratio)
        self.linear1 = nn.Linear(hidden_size, hidden_size * 3 + self.mlp_hidden_dim)
        self.linear2 = nn.Linear(hidden_size + self.mlp_hidden_dim, hidden_size)
        self.norm = QKNorm(head_dim, use_compiled=use_compiled)
        self.hidden_size = hidden_size
        self.pre_norm = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.mlp_act = nn.GELU(approximate="tanh")
        self.use_compiled = use_compiled

    def modulation_shift_scale_fn(self, x, scale, shift):
        if self.use_compiled:
            return torch.compile(_modulation_shift_scale_fn)(x, scale, shift)
        else:
            return _modulation_shift_scale_fn(x, scale, shift)

    def modulation_gate_fn(self, x, gate, gate_params):
        if self.use_compiled:
            return torch.compile(_modulation_gate_fn)(x, gate, gate_params)
        else:
            return _modulation_gate_fn(x, gate, gate_params)

    def forward(self, x: Tensor, pe: Tensor, distill_vec: list[ModulationOut], mask: Tensor) -> Tensor:
        mod = distill_vec
        x_mod = self.modulation_shift_scale_fn(self.pre_norm(x), mod.scale, mod.shift)
        qkv, mlp = torch.split(
            self.linear1(x_mod), [3 * self.hidden_size, self.mlp_hidden_dim], dim=-1
        )

        q, k, v = split_qkv(qkv, self.num_heads)
        q, k = self.norm(q, k, v)

        # compute attention
        attn = attention(q, k, v, pe=pe, mask=mask)
        # compute activation in mlp stream, cat again and run second linear layer
        output = self.linear2(torch.cat((attn, self.mlp_act(mlp)), 2))
        return self.modulation_gate_fn(x, mod.gate, output)


# ---- models/chroma.py (verbatim) -------------------------------------------
@dataclass
class ModulationOutSpec:
    shift: slice
    scale: slice
    gate: slice


def distribute_modulations():
    block_dict = {}

    # HARD CODED VALUES! lookup table for the generated vectors
    # TODO: move this into chroma config!
    # Add 38 single mod blocks
    for i in range(38):
        key = f"single_blocks.{i}.modulation.lin"
        block_dict[key] = None

    # Add 19 image double blocks
    for i in range(19):
        key = f"double_blocks.{i}.img_mod.lin"
        block_dict[key] = None

    # Add 19 text double blocks
    for i in range(19):
        key = f"double_blocks.{i}.txt_mod.lin"
        block_dict[key] = None

    # Add the final layer
    block_dict["final_layer.adaLN_modulation.1"] = None
    # 6.2b version
    block_dict["lite_double_blocks.4.img_mod.lin"] = None
    block_dict["lite_double_blocks.4.txt_mod.lin"] = None

    idx = 0  # Index to keep track of the vector slices

    for key in block_dict.keys():
        if "single_blocks" in key:
            # Single block: 1 ModulationOut
            block_dict[key] = ModulationOutSpec(
                shift=slice(idx, idx+1),
                scale=slice(idx+1, idx+2),
                gate=slice(idx+2, idx+3),
            )
            idx += 3  # Advance by 3 vectors

        elif "img_mod" in key:
            # Double block: List of 2 ModulationOut
            double_block = []
            for _ in range(2):  # Create 2 ModulationOut objects
                double_block.append(
                    ModulationOutSpec(
                        shift=slice(idx, idx+1),
                        scale=slice(idx+1, idx+2),
                        gate=slice(idx+2, idx+3),
                    )
                )
                idx += 3  # Advance by 3 vectors per ModulationOut
            block_dict[key] = double_block

        elif "txt_mod" in key:
            # Double block: List of 2 ModulationOut
            double_block = []
            for _ in range(2):  # Create 2 ModulationOut objects
                double_block.append(
                    ModulationOutSpec(
                        shift=slice(idx, idx+1),
                        scale=slice(idx+1, idx+2),
                        gate=slice(idx+2, idx+3),
                    )
                )
                idx += 3  # Advance by 3 vectors per ModulationOut
            block_dict[key] = double_block

        elif "final_layer" in key:
            # Final layer: 1 ModulationOut
            block_dict[key] = [
                slice(idx, idx+1),
                slice(idx+1, idx+2),
            ]
            idx += 2  # Advance by 3 vectors

    return block_dict

modulation_distribute_dict = distribute_modulations()
MOD_INDEX_LENGTH = 344  # 38*3 + 19*6*2 + 2 (+ lite blocks unused)


# ---- utils/offloading.py ModelOffloader (block swap disabled: early returns)
class ModelOffloader:
    def __init__(self, blocks_to_swap=0):
        self.blocks_to_swap = blocks_to_swap
        self.reentrant_activation_checkpointing = False

    def wait_for_block(self, block_idx: int):
        if self.blocks_to_swap is None or self.blocks_to_swap == 0:
            return
        raise NotImplementedError  # swapping not reproduced

    def submit_move_blocks_forward(self, block_idx: int):
        # check if blocks_to_swap is enabled
        if self.blocks_to_swap is None or self.blocks_to_swap == 0:
            return
        raise NotImplementedError  # swapping not reproduced


class TransformerWrapper(nn.Module):
    def __init__(self, block, idx, offloader):
        super().__init__()
        self.block = block
        self.idx = idx
        self.offloader = offloader

    @torch.autocast('cuda', dtype=AUTOCAST_DTYPE, enabled=torch.cuda.is_available())  # real: no `enabled=` (CPU run)
    def forward(self, inputs):
        img, txt, pe, mod_vectors, txt_img_mask = inputs

        self.offloader.wait_for_block(self.idx)

        double_mod = self._get_mods(mod_vectors)
        img, txt = self.block(
            img=img, txt=txt, pe=pe, distill_vec=double_mod, mask=txt_img_mask
        )

        self.offloader.submit_move_blocks_forward(self.idx)

        return make_contiguous(img, txt, pe, mod_vectors, txt_img_mask)

    @torch.compiler.disable
    def _get_mods(self, mod_vectors):
        img_mod_spec = modulation_distribute_dict[f"double_blocks.{self.idx}.img_mod.lin"]
        txt_mod_spec = modulation_distribute_dict[f"double_blocks.{self.idx}.txt_mod.lin"]
        img_mod = [
            ModulationOut(
                shift=mod_vectors[:, spec.shift, :],
                scale=mod_vectors[:, spec.scale, :],
                gate=mod_vectors[:, spec.gate, :],
            )
            for spec in img_mod_spec
        ]
        txt_mod = [
            ModulationOut(
                shift=mod_vectors[:, spec.shift, :],
                scale=mod_vectors[:, spec.scale, :],
                gate=mod_vectors[:, spec.gate, :],
            )
            for spec in txt_mod_spec
        ]
        return [img_mod, txt_mod]


def concatenate_hidden_states(inputs):
    img, txt, pe, mod_vectors, txt_img_mask = inputs
    img = torch.cat((txt, img), 1)
    return img, txt, pe, mod_vectors, txt_img_mask


class SingleTransformerWrapper(nn.Module):
    def __init__(self, block, idx, offloader):
        super().__init__()
        self.block = block
        self.idx = idx
        self.offloader = offloader

    @torch.autocast('cuda', dtype=AUTOCAST_DTYPE, enabled=torch.cuda.is_available())  # real: no `enabled=` (CPU run)
    def forward(self, inputs):
        img, txt, pe, mod_vectors, txt_img_mask = inputs

        self.offloader.wait_for_block(self.idx)

        single_mod = self._get_mods(mod_vectors)
        img = self.block(img, pe=pe, distill_vec=single_mod, mask=txt_img_mask)

        self.offloader.submit_move_blocks_forward(self.idx)

        return make_contiguous(img, txt, pe, mod_vectors, txt_img_mask)

    @torch.compiler.disable
    def _get_mods(self, mod_vectors):
        single_mod_spec = modulation_distribute_dict[f"single_blocks.{self.idx}.modulation.lin"]
        single_mod = ModulationOut(
            shift=mod_vectors[:, single_mod_spec.shift, :],
            scale=mod_vectors[:, single_mod_spec.scale, :],
            gate=mod_vectors[:, single_mod_spec.gate, :],
        )
        return single_mod


class Chroma(nn.Module):  # stand-in: only the block lists
    def __init__(self, depth, depth_single_blocks, hidden_size, num_heads):
        super().__init__()
        self.double_blocks = nn.ModuleList([DoubleStreamBlock(hidden_size, num_heads, mlp_ratio=4.0, qkv_bias=True) for _ in range(depth)])
        self.single_blocks = nn.ModuleList([SingleStreamBlock(hidden_size, num_heads, mlp_ratio=4.0) for _ in range(depth_single_blocks)])


class ChromaPipeline:
    def __init__(self, depth, depth_single_blocks, hidden_size, num_heads):
        self.offloader_double = ModelOffloader()
        self.offloader_single = ModelOffloader()
        self.transformer = Chroma(depth, depth_single_blocks, hidden_size, num_heads)

    def to_layers(self):
        transformer = self.transformer
        layers = []  # InitialLayer omitted: inputs built directly below
        for i, block in enumerate(transformer.double_blocks):
            layers.append(TransformerWrapper(block, i, self.offloader_double))
        layers.append(concatenate_hidden_states)
        for i, block in enumerate(transformer.single_blocks):
            layers.append(SingleTransformerWrapper(block, i, self.offloader_single))
        return layers  # FinalLayer omitted


# ---- stand-in for deepspeed PipelineModule (ManualPipelineModule) ----------
class ManualPipelineModule(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.forward_funcs = list(layers)
        self.layers = nn.ModuleList([l for l in layers if isinstance(l, nn.Module)])

    def compile(self, *args, **kwargs):  # deepspeed/runtime/pipe/module.py, verbatim
        for idx, layer in enumerate(self.forward_funcs):
            if isinstance(layer, nn.Module):
                layer.compile(*args, **kwargs)
            else:
                new_layer = torch.compile(layer, *args, **kwargs)
                self.forward_funcs[idx] = new_layer

    def forward(self, inputs):
        x = inputs
        for layer in self.forward_funcs:
            x = layer(x)
        return x


# ---- train.py ---------------------------------------------------------------
# real Chroma: 19 double + 38 single blocks, hidden 3072, 24 heads
DEPTH, DEPTH_SINGLE, HIDDEN, HEADS = 4, 6, 32, 2
torch.manual_seed(0)
pipe = ChromaPipeline(DEPTH, DEPTH_SINGLE, HIDDEN, HEADS)
pipeline_model = ManualPipelineModule(pipe.to_layers())
config = {'compile': True}
if config['compile']:
    pipeline_model.compile(backend=counting_backend)  # real: pipeline_model.compile()

B, L_IMG, L_TXT, HD = 1, 16, 8, HIDDEN // HEADS
checksum = 0.0
with torch.no_grad():
    for step in range(2):
        img = torch.randn(B, L_IMG, HIDDEN)
        txt = torch.randn(B, L_TXT, HIDDEN)
        pe = torch.randn(B, 1, L_TXT + L_IMG, HD // 2, 2, 2)
        mod_vectors = torch.randn(B, MOD_INDEX_LENGTH, HIDDEN) * 0.1
        txt_img_mask = torch.ones(B, HEADS, L_TXT + L_IMG, L_TXT + L_IMG, dtype=torch.bool)
        out = pipeline_model((img, txt, pe, mod_vectors, txt_img_mask))
        checksum += float(out[0].sum())

print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
