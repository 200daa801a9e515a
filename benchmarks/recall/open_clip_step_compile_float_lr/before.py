# Reproduction of mlfoundations/open_clip BEFORE 0b07760 ("Tensorize optimizer learning rates for step
# compile", 2026-05-26). With --torchcompile --torchcompile-strategy step, open_clip_train compiles the whole
# train step (forward, loss, backward, optimizer.step()). main.py turned the learning rates into tensors only
# for native AdamW on CUDA (`use_tensor_learning_rate = ... and opt == 'adamw' and device.type == 'cuda'`);
# elsewhere (CPU, other optimizers) the per-step cosine schedule writes a new Python float into every
# param group and the compiled optimizer step recompiles on it.
# Model/loss/task code is that of recall/open_clip_loss_label_cache/after.py (open_clip at 3650e7b, which
# already disables the loss label cache under step compile); scheduler.py, train.py's step-compile path and
# main.py's optimizer creation are at 0b07760^.
import math
from collections import OrderedDict
from types import SimpleNamespace
from typing import Callable, Dict, Optional, Tuple, Type

import torch
from torch import nn
from torch.nn import functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


def to_2tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


# ---- src/open_clip/transformer.py (trimmed) ----
class LayerNormFp32(nn.LayerNorm):
    """Subclass torch's LayerNorm to handle fp16 (by casting to float32 and back)."""

    def forward(self, x: torch.Tensor):
        orig_type = x.dtype
        x = F.layer_norm(x.to(torch.float32), self.normalized_shape, self.weight, self.bias, self.eps)
        return x.to(orig_type)


class LayerNorm(nn.LayerNorm):
    """Subclass torch's LayerNorm (with cast back to input dtype)."""

    def forward(self, x: torch.Tensor):
        orig_type = x.dtype
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.to(orig_type)


class Attention(nn.Module):
    def __init__(
            self,
            dim: int,
            num_heads: int = 8,
            qkv_bias: bool = True,
            attn_drop: float = 0.,
            proj_drop: float = 0.,
            use_sdpa: bool = True,
    ):
        super().__init__()
        assert dim % num_heads == 0, 'dim should be divisible by num_heads'
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.use_sdpa = use_sdpa
        # Same-dim: combined in_proj_weight (3*dim, dim) — matches nn.MHA and existing checkpoints
        self.in_proj_weight = nn.Parameter(torch.empty((dim * 3, dim)))
        if qkv_bias:
            self.in_proj_bias = nn.Parameter(torch.empty(dim * 3))
        else:
            self.in_proj_bias = None
        self.ln_q = nn.Identity()
        self.ln_k = nn.Identity()
        self.logit_scale = None
        self.attn_drop = nn.Dropout(attn_drop)
        self.head_scale = None
        self.ln_inner = nn.Identity()
        self.out_proj = nn.Linear(dim, dim)
        self.out_drop = nn.Dropout(proj_drop)
        self._reset_parameters()

    def _reset_parameters(self):
        # Match nn.MultiheadAttention init
        nn.init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            nn.init.constant_(self.in_proj_bias, 0.)
        nn.init.constant_(self.out_proj.bias, 0.)

    def forward(self, x, k_x=None, v_x=None, attn_mask=None):
        N, L, C = x.shape
        # Self-attention fast path: fused QKV projection
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)

        q = q.reshape(N, -1, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.reshape(N, -1, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.reshape(N, -1, self.num_heads, self.head_dim).transpose(1, 2)

        if attn_mask is not None and attn_mask.ndim == 3:
            # reshape (N*num_heads, L, L) -> (N, num_heads, L, L)
            attn_mask = attn_mask.reshape(N, self.num_heads, L, L)

        q = self.ln_q(q)
        k = self.ln_k(k)
        if self.use_sdpa:
            x = F.scaled_dot_product_attention(
                q, k, v,
                attn_mask=attn_mask,
                dropout_p=self.attn_drop.p if self.training else 0.,
                scale=self.scale,
            )
        else:
            q = q * self.scale
            attn = q @ k.transpose(-1, -2)
            if attn_mask is not None:
                attn = attn + attn_mask.to(dtype=attn.dtype)
            attn = attn.softmax(dim=-1)
            attn = self.attn_drop(attn)
            x = attn @ v

        x = x.transpose(1, 2).reshape(N, -1, C)
        x = self.ln_inner(x)
        x = self.out_proj(x)
        x = self.out_drop(x)
        return x


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model: int, n_head: int, mlp_ratio: float = 4.0, act_layer: Callable = nn.GELU,
                 norm_layer: Callable = LayerNorm):
        super().__init__()
        self.ln_1 = norm_layer(d_model)
        self.attn = Attention(d_model, num_heads=n_head, qkv_bias=True)
        self.ls_1 = nn.Identity()
        self.ln_2 = norm_layer(d_model)
        mlp_width = int(d_model * mlp_ratio)
        self.mlp = nn.Sequential(OrderedDict([
            ("c_fc", nn.Linear(d_model, mlp_width)),
            ("gelu", act_layer()),
            ("c_proj", nn.Linear(mlp_width, d_model))
        ]))
        self.ls_2 = nn.Identity()

    def get_weight_dtype(self) -> torch.dtype:
        if hasattr(self.mlp.c_fc, 'int8_original_dtype'):
            return self.mlp.c_fc.int8_original_dtype
        return self.mlp.c_fc.weight.dtype

    def attention(self, q_x, k_x=None, v_x=None, attn_mask=None):
        k_x = k_x if k_x is not None else q_x
        v_x = v_x if v_x is not None else q_x
        attn_mask = attn_mask.to(q_x.dtype) if attn_mask is not None else None
        return self.attn(q_x, k_x=k_x, v_x=v_x, attn_mask=attn_mask)

    def forward(self, q_x, k_x=None, v_x=None, attn_mask=None):
        k_x = self.ln_1_kv(k_x) if hasattr(self, "ln_1_kv") and k_x is not None else None
        v_x = self.ln_1_kv(v_x) if hasattr(self, "ln_1_kv") and v_x is not None else None
        x = q_x + self.ls_1(self.attention(q_x=self.ln_1(q_x), k_x=k_x, v_x=v_x, attn_mask=attn_mask))
        x = x + self.ls_2(self.mlp(self.ln_2(x)))
        return x


class Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, mlp_ratio: float = 4.0,
                 act_layer: Type[nn.Module] = nn.GELU, norm_layer: Type[nn.Module] = LayerNorm):
        super().__init__()
        self.width = width
        self.layers = layers
        self.grad_checkpointing = False
        self.resblocks = nn.ModuleList([
            ResidualAttentionBlock(width, heads, mlp_ratio, act_layer=act_layer, norm_layer=norm_layer)
            for _ in range(layers)
        ])

    def get_cast_dtype(self) -> torch.dtype:
        return self.resblocks[0].get_weight_dtype()

    def forward(self, x: torch.Tensor, attn_mask: Optional[torch.Tensor] = None):
        for r in self.resblocks:
            x = r(x, attn_mask=attn_mask)
        return x


def _expand_token(token, batch_size: int):
    return token.view(1, 1, -1).expand(batch_size, -1, -1)


class VisionTransformer(nn.Module):
    def __init__(self, image_size: int, patch_size: int, width: int, layers: int, heads: int,
                 mlp_ratio: float, output_dim: int = 512, pool_type: str = 'tok',
                 act_layer: Callable = nn.GELU, norm_layer: Callable = LayerNorm):
        super().__init__()
        assert pool_type in ('tok', 'avg', 'none')
        self.output_tokens = False
        image_height, image_width = self.image_size = to_2tuple(image_size)
        patch_height, patch_width = self.patch_size = to_2tuple(patch_size)
        self.grid_size = (image_height // patch_height, image_width // patch_width)
        self.final_ln_after_pool = False
        self.output_dim = output_dim
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=width, kernel_size=patch_size, stride=patch_size,
                               bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(
            scale * torch.randn(self.grid_size[0] * self.grid_size[1] + 1, width))
        self.patch_dropout = nn.Identity()
        self.ln_pre = norm_layer(width)
        self.transformer = Transformer(width, layers, heads, mlp_ratio, act_layer=act_layer,
                                       norm_layer=norm_layer)
        self.attn_pool = None
        self.ln_post = norm_layer(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))
        self.pool_type = pool_type

    def _global_pool(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.pool_type == 'avg':
            pooled, tokens = x[:, 1:].mean(dim=1), x[:, 1:]
        elif self.pool_type == 'tok':
            pooled, tokens = x[:, 0], x[:, 1:]
        else:
            pooled = tokens = x
        return pooled, tokens

    def _embeds(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)  # shape = [*, dim, grid, grid]
        x = x.reshape(x.shape[0], x.shape[1], -1)  # shape = [*, width, grid ** 2]
        x = x.permute(0, 2, 1)  # shape = [*, grid ** 2, width]
        # class embeddings and positional embeddings
        x = torch.cat([_expand_token(self.class_embedding, x.shape[0]).to(x.dtype), x], dim=1)
        x = x + self.positional_embedding.to(x.dtype)
        x = self.patch_dropout(x)
        x = self.ln_pre(x)
        return x

    def _pool(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        x = self.ln_post(x)
        pooled, tokens = self._global_pool(x)
        return pooled, tokens

    def forward(self, x: torch.Tensor):
        x = self._embeds(x)
        x = self.transformer(x)
        pooled, tokens = self._pool(x)
        if self.proj is not None:
            pooled = pooled @ self.proj
        if self.output_tokens:
            return pooled, tokens
        return pooled


def text_global_pool(x, text=None, pool_type='argmax', eos_token_id=None):
    if pool_type == 'first':
        pooled = x[:, 0]
    elif pool_type == 'last':
        pooled = x[:, -1]
    elif pool_type == 'argmax':
        # take features from the eot embedding (eot_token is the highest number in each sequence)
        assert text is not None
        pooled = x[torch.arange(x.shape[0], device=x.device), text.argmax(dim=-1)]
    elif pool_type == 'eos':
        assert text is not None
        assert eos_token_id is not None
        idx = (text == eos_token_id).int().argmax(dim=-1)
        pooled = x[torch.arange(x.shape[0], device=x.device), idx]
    else:
        pooled = x
    return pooled


class TextTransformer(nn.Module):
    def __init__(self, context_length: int = 77, vocab_size: int = 49408, width: int = 512, heads: int = 8,
                 layers: int = 12, mlp_ratio: float = 4.0, output_dim: Optional[int] = 512,
                 eos_id: int = 2, pool_type: str = 'argmax', act_layer=nn.GELU, norm_layer=LayerNorm):
        super().__init__()
        self.num_pos = self.context_length = context_length
        self.vocab_size = vocab_size
        self.width = width
        self.output_dim = output_dim
        self.heads = heads
        self.eos_id = eos_id
        self.pool_type = pool_type
        self.token_embedding = nn.Embedding(vocab_size, width)
        self.cls_emb = None
        self.positional_embedding = nn.Parameter(torch.empty(self.num_pos, width))
        self.transformer = Transformer(width=width, layers=layers, heads=heads, mlp_ratio=mlp_ratio,
                                       act_layer=act_layer, norm_layer=norm_layer)
        self.ln_final = norm_layer(width)
        self.register_buffer('attn_mask', self.build_causal_mask(), persistent=False)
        self.text_projection = nn.Parameter(torch.empty(width, output_dim))
        self.init_parameters()

    def init_parameters(self):
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        proj_std = (self.transformer.width ** -0.5) * ((2 * self.transformer.layers) ** -0.5)
        attn_std = self.transformer.width ** -0.5
        fc_std = (2 * self.transformer.width) ** -0.5
        for block in self.transformer.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=attn_std)
            nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
            nn.init.normal_(block.mlp.c_fc.weight, std=fc_std)
            nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
        nn.init.normal_(self.text_projection, std=self.transformer.width ** -0.5)

    def build_causal_mask(self):
        # lazily create causal attention mask, with full attention between the tokens
        # pytorch uses additive attention mask; fill with -inf
        mask = torch.empty(self.num_pos, self.num_pos)
        mask.fill_(float("-inf"))
        mask.triu_(1)  # zero out the lower diagonal
        return mask


# ---- src/open_clip/model.py: CLIP (towers built from the two classes above) ----
def _build_vision_tower(embed_dim, vision_cfg):
    return VisionTransformer(
        image_size=vision_cfg.image_size, patch_size=vision_cfg.patch_size, width=vision_cfg.width,
        layers=vision_cfg.layers, heads=vision_cfg.width // vision_cfg.head_width,
        mlp_ratio=vision_cfg.mlp_ratio, output_dim=embed_dim)


def _build_text_tower(embed_dim, text_cfg):
    return TextTransformer(
        context_length=text_cfg.context_length, vocab_size=text_cfg.vocab_size, width=text_cfg.width,
        heads=text_cfg.heads, layers=text_cfg.layers, output_dim=embed_dim)


class CLIP(nn.Module):

    def __init__(self, embed_dim, vision_cfg, text_cfg, init_logit_scale: float = math.log(1 / 0.07),
                 init_logit_bias: Optional[float] = None, nonscalar_logit_scale: bool = False,
                 output_dict: bool = False):
        super().__init__()
        self.output_dict = output_dict

        self.visual = _build_vision_tower(embed_dim, vision_cfg)

        text = _build_text_tower(embed_dim, text_cfg)
        self.transformer = text.transformer
        self.context_length = text.context_length
        self.vocab_size = text.vocab_size
        self.token_embedding = text.token_embedding
        self.positional_embedding = text.positional_embedding
        self.ln_final = text.ln_final
        self.text_projection = text.text_projection
        self.text_pool_type = text.pool_type
        self.text_eos_id = text.eos_id
        self.register_buffer('attn_mask', text.attn_mask, persistent=False)

        lshape = [1] if nonscalar_logit_scale else []
        self.logit_scale = nn.Parameter(torch.ones(lshape) * init_logit_scale)
        if init_logit_bias is not None:
            self.logit_bias = nn.Parameter(torch.ones(lshape) * init_logit_bias)
        else:
            self.logit_bias = None

    def _encode_image(self, image, normalize: bool = False):
        features = self.visual(image)
        return F.normalize(features, dim=-1) if normalize else features

    def _encode_text(self, text, normalize: bool = False):
        cast_dtype = self.transformer.get_cast_dtype()

        x = self.token_embedding(text).to(cast_dtype)  # [batch_size, n_ctx, d_model]

        x = x + self.positional_embedding.to(cast_dtype)
        x = self.transformer(x, attn_mask=self.attn_mask)
        x = self.ln_final(x)  # [batch_size, n_ctx, transformer.width]
        x = text_global_pool(x, text, self.text_pool_type, eos_token_id=getattr(self, "text_eos_id", None))
        if self.text_projection is not None:
            if isinstance(self.text_projection, nn.Linear):
                x = self.text_projection(x)
            else:
                x = x @ self.text_projection

        return F.normalize(x, dim=-1) if normalize else x

    def forward(self, image: Optional[torch.Tensor] = None, text: Optional[torch.Tensor] = None):
        image_features = self._encode_image(image, normalize=True) if image is not None else None
        text_features = self._encode_text(text, normalize=True) if text is not None else None

        if self.output_dict:
            out_dict = {
                "image_features": image_features,
                "text_features": text_features,
                "logit_scale": self.logit_scale.exp()
            }
            if self.logit_bias is not None:
                out_dict['logit_bias'] = self.logit_bias.clone()
            return out_dict

        if self.logit_bias is not None:
            return image_features, text_features, self.logit_scale.exp(), self.logit_bias.clone()
        return image_features, text_features, self.logit_scale.exp()


# ---- src/open_clip/loss.py: ClipLoss (verbatim; gather_features only runs for world_size > 1) ----
class ClipLoss(nn.Module):

    def __init__(
            self,
            local_loss=False,
            gather_with_grad=False,
            cache_labels=False,
            rank=0,
            world_size=1,
    ):
        super().__init__()
        self.local_loss = local_loss
        self.gather_with_grad = gather_with_grad
        self.cache_labels = cache_labels
        self.rank = rank
        self.world_size = world_size

        # cache state
        self.prev_num_logits = 0
        self.labels = {}

    def get_ground_truth(self, device, num_logits) -> torch.Tensor:
        # calculated ground-truth and cache if enabled
        if self.prev_num_logits != num_logits or device not in self.labels:
            labels = torch.arange(num_logits, device=device, dtype=torch.long)
            if self.world_size > 1 and self.local_loss:
                labels = labels + num_logits * self.rank
            if self.cache_labels:
                self.labels[device] = labels
                self.prev_num_logits = num_logits
        else:
            labels = self.labels[device]
        return labels

    def get_logits(self, image_features, text_features, logit_scale, logit_bias=None):
        if self.world_size > 1:
            raise NotImplementedError("gather_features: single-process reproduction")
        else:
            logits_per_image = logit_scale * image_features @ text_features.T
            logits_per_text = logit_scale * text_features @ image_features.T

        if logit_bias is not None:
            logits_per_image += logit_bias
            logits_per_text += logit_bias

        return logits_per_image, logits_per_text

    def forward(self, image_features, text_features, logit_scale, logit_bias=None, output_dict=False):
        device = image_features.device
        logits_per_image, logits_per_text = self.get_logits(
            image_features,
            text_features,
            logit_scale,
            logit_bias=logit_bias,
        )

        labels = self.get_ground_truth(device, logits_per_image.shape[0])

        total_loss = (
            F.cross_entropy(logits_per_image, labels) +
            F.cross_entropy(logits_per_text, labels)
        ) / 2

        return {"contrastive_loss": total_loss} if output_dict else total_loss


# ---- src/open_clip/task/base_task.py, image_text_task.py, clip_task.py (trimmed) ----
def unwrap_model(model: nn.Module) -> nn.Module:
    """Unwrap model from DDP and/or torch.compile wrappers."""
    unwrapped = model
    if hasattr(unwrapped, 'module'):
        unwrapped = unwrapped.module
    if hasattr(unwrapped, '_orig_mod'):
        unwrapped = unwrapped._orig_mod
    return unwrapped


class TrainingTask(nn.Module):
    def __init__(self, model: nn.Module, *, device=None, dtype=None, verbose: bool = True):
        super().__init__()
        self.trainable_module = model
        self.trainable_module_ema = None
        self._device = device
        self._dtype = dtype
        self._verbose = verbose
        self._fsdp_enabled = False
        self.normalize_checkpoint_scalars = True
        self._compiled_training_forward = None
        self._compiled_eval_forward = None

    @staticmethod
    def _compile_kwargs(backend=None, mode=None, **compile_kwargs) -> dict:
        kwargs = {k: v for k, v in compile_kwargs.items() if v is not None}
        if backend is not None:
            kwargs['backend'] = backend
        if mode is not None:
            kwargs['mode'] = mode
        return kwargs

    def compile(self, *, target: str = 'task', backend=None, mode=None, compile_train: bool = True,
                compile_eval: bool = True, **compile_kwargs) -> 'TrainingTask':
        kwargs = self._compile_kwargs(backend=backend, mode=mode, **compile_kwargs)
        if target == 'model':
            self.trainable_module = torch.compile(self.trainable_module, **kwargs)
        elif target == 'task':
            if compile_train:
                self._compiled_training_forward = torch.compile(self.training_forward, **kwargs)
            if compile_eval:
                self._compiled_eval_forward = torch.compile(self.eval_forward, **kwargs)
        else:
            raise ValueError(f"Unsupported task compile target: {target}")
        return self

    def prepare_batch(self, batch: dict, device: torch.device, input_dtype=None) -> dict:
        prepared = {}
        for key, val in batch.items():
            if isinstance(val, torch.Tensor):
                if val.is_floating_point():
                    prepared[key] = val.to(device=device, dtype=input_dtype, non_blocking=True)
                else:
                    prepared[key] = val.to(device=device, non_blocking=True)
            elif isinstance(val, dict):
                prepared[key] = self.prepare_batch(val, device, input_dtype)
            else:
                prepared[key] = val
        return prepared

    def get_trainable_module(self, use_ema: bool = True) -> nn.Module:
        if use_ema and self.trainable_module_ema is not None:
            return self.trainable_module_ema.module
        return unwrap_model(self.trainable_module)

    def batch_size(self, batch: Dict[str, torch.Tensor]) -> int:
        data_keys = getattr(self, 'data_keys', None)
        key = data_keys[0] if data_keys else next(iter(batch))
        value = batch[key]
        if isinstance(value, torch.Tensor):
            return value.shape[0]
        return len(value)

    def eval_forward(self, batch: Dict[str, torch.Tensor]):
        return self.get_trainable_module(use_ema=True)(**batch)

    def forward(self, *args, **kwargs):
        """Normalize task call conventions, then run train or eval forward."""
        if len(args) == 1 and isinstance(args[0], dict):
            batch = args[0]
            if kwargs:
                batch = {**batch, **kwargs}
        elif args and kwargs:
            batch = dict(zip(self.data_keys, args))
            batch.update(kwargs)
        elif args:
            batch = dict(zip(self.data_keys, args))
        else:
            batch = kwargs

        if not self.training:
            forward_fn = self._compiled_eval_forward or self.eval_forward
        else:
            forward_fn = self._compiled_training_forward or self.training_forward
        return forward_fn(batch)

    def training_forward(self, batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        raise NotImplementedError


class ImageTextTask(TrainingTask):
    @property
    def data_keys(self) -> Tuple[str, ...]:
        return ("image", "text")

    def clamp_logit_scale(self, max_val: float = math.log(100)):
        model = unwrap_model(self.trainable_module)
        if hasattr(model, 'logit_scale'):
            with torch.no_grad():
                model.logit_scale.clamp_(0, max_val)


class CLIPTask(ImageTextTask):
    """Standard CLIP training task wrapping model + ClipLoss."""

    def __init__(self, model: nn.Module, *, loss=None, default_loss: bool = True, local_loss: bool = False,
                 gather_with_grad: bool = False, cache_labels: bool = True, rank: int = 0,
                 world_size: int = 1, device=None, dtype=None, verbose: bool = True):
        super().__init__(model, device=device, dtype=dtype, verbose=verbose)
        if loss is not None:
            self.loss = loss
        elif default_loss:
            self.loss = ClipLoss(
                local_loss=local_loss,
                gather_with_grad=gather_with_grad,
                cache_labels=cache_labels,
                rank=rank,
                world_size=world_size,
            )

    def training_forward(self, batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        model_out = self.trainable_module(**batch)
        logit_scale = model_out["logit_scale"]
        losses = self.loss(**model_out, output_dict=True)
        total_loss = sum(v for k, v in losses.items() if k.endswith('_loss'))
        losses["loss"] = total_loss
        losses["logit_scale"] = logit_scale
        return losses


# ---- src/open_clip/factory.py: create_task (CLIP branch) ----
def _use_loss_label_cache(args):
    # Task/step compile captures the loss module. Avoid mutable label-cache
    # state inside compiled regions; arange is cheap enough.
    return not (
        getattr(args, "torchcompile", False)
        and getattr(args, "torchcompile_strategy", "task") in ("task", "step")
    )


def create_task(args, model, dist_model=None, naflex_data_config=None):
    cache_labels = _use_loss_label_cache(args)
    shared = dict(rank=args.rank, world_size=args.world_size)
    task = CLIPTask(
        model,
        local_loss=args.local_loss,
        gather_with_grad=args.gather_with_grad,
        cache_labels=cache_labels,
        **shared,
    )
    return task


# ---- src/open_clip_train/scheduler.py (0b07760^) ----
def assign_learning_rate(optimizer, new_lr):
    for param_group in optimizer.param_groups:
        lr = param_group["lr"]
        if isinstance(lr, torch.Tensor):
            lr.fill_(new_lr)
        else:
            param_group["lr"] = new_lr


def get_learning_rate(optimizer):
    lr = optimizer.param_groups[0]["lr"]
    return lr.item() if isinstance(lr, torch.Tensor) else lr


def tensorize_learning_rate(optimizer, device):
    for param_group in optimizer.param_groups:
        lr = param_group["lr"]
        if isinstance(lr, torch.Tensor):
            lr = lr.detach().to(device=device)
        else:
            lr = torch.tensor(float(lr), device=device)
        param_group["lr"] = lr


def _warmup_lr(base_lr, warmup_length, step):
    return base_lr * (step + 1) / warmup_length


def cosine_lr(optimizer, base_lr, warmup_length, steps):
    def _lr_adjuster(step):
        if step < warmup_length:
            lr = _warmup_lr(base_lr, warmup_length, step)
        else:
            e = step - warmup_length
            es = steps - warmup_length
            lr = 0.5 * (1 + math.cos(math.pi * e / es)) * base_lr
        assign_learning_rate(optimizer, lr)
        return lr

    return _lr_adjuster


# ---- src/open_clip_train/train.py (0b07760^: TrainState and the step-compile path) ----
from dataclasses import dataclass
from typing import Any


@dataclass
class TrainState:
    """Runtime training state."""
    task: Any
    optimizer: Optional[torch.optim.Optimizer] = None
    scaler: Optional[Any] = None
    scheduler: Optional[Callable[[int], None]] = None
    epoch: int = 0
    global_step: int = 0
    samples_seen: int = 0
    compiled_train_step: Optional[Callable] = None


def _torch_compile_kwargs(args):
    kwargs = {}
    backend = getattr(args, "torchcompile_backend", None)
    mode = getattr(args, "torchcompile_mode", None)
    if backend is not None:
        kwargs["backend"] = backend
    if mode is not None:
        kwargs["mode"] = mode
    return kwargs


def _make_train_step_no_accum_no_scaler(task, optimizer, autocast, args):
    grad_clip_norm = getattr(args, "grad_clip_norm", None)
    # Parameters are snapshotted when the step is created/compiled. Do not swap
    # or re-wrap task.trainable_module after this point.
    clip_params = tuple(task.trainable_module.parameters()) if grad_clip_norm is not None else ()

    def train_step(batch):
        # Keep zero_grad and logit-scale clamp outside this compiled closure.
        # Dynamo intentionally graph-breaks on optimizer.zero_grad(), and the
        # clamp is tiny eager bookkeeping after the optimizer update.
        loss_scale = 1.0  # get_naflex_loss_scale(batch, args, task): not a NaFlex batch
        with autocast():
            losses = task(batch)
            total_loss = losses["loss"]
        if loss_scale != 1.0:
            total_loss = total_loss * loss_scale
        total_loss.backward()
        if grad_clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(clip_params, grad_clip_norm, norm_type=2.0)
        optimizer.step()
        return losses

    return train_step


def _get_compiled_train_step(state: TrainState, autocast, args):
    assert state.optimizer is not None, "_get_compiled_train_step requires state.optimizer."
    if state.compiled_train_step is not None:
        return state.compiled_train_step

    compiled_train_step = torch.compile(
        _make_train_step_no_accum_no_scaler(state.task, state.optimizer, autocast, args),
        **_torch_compile_kwargs(args),
    )
    state.compiled_train_step = compiled_train_step
    return state.compiled_train_step


def train_one_epoch(state: TrainState, dataloader, args, results):
    from contextlib import nullcontext
    task = state.task
    optimizer = state.optimizer
    scheduler = state.scheduler
    epoch = state.epoch
    device = torch.device(args.device)
    autocast = nullcontext  # get_autocast('fp32')
    compile_step = (
        getattr(args, "torchcompile", False)
        and getattr(args, "torchcompile_strategy", "task") == "step"
    )
    if compile_step:
        train_step = _get_compiled_train_step(state, autocast, args)
    else:
        train_step = _make_train_step_no_accum_no_scaler(task, optimizer, autocast, args)

    task.train()
    num_batches_per_epoch = len(dataloader) // args.accum_freq
    for i, batch in enumerate(dataloader):
        i_accum = i // args.accum_freq
        step = num_batches_per_epoch * epoch + i_accum

        if not args.skip_scheduler:
            scheduler(step)

        batch = task.prepare_batch(batch, device=device, input_dtype=None)
        optimizer.zero_grad()
        losses = train_step(batch)
        task.clamp_logit_scale()
        results.append(losses["loss"].item() + losses["logit_scale"].item())


# ---- driver: src/open_clip_train/main.py with --dataset-type synthetic --torchcompile --torchcompile-strategy step ----
torch.manual_seed(0)
args = SimpleNamespace(
    device="cpu", rank=0, world_size=1, local_loss=False, gather_with_grad=False, accum_freq=1,
    skip_scheduler=False, grad_clip_norm=None, lr=5e-4, warmup=2, epochs=2, batch_size=8,
    train_num_samples=36, torchcompile=True, torchcompile_strategy="step",
    torchcompile_backend=counting_backend, torchcompile_mode=None,
    opt="adamw", beta1=0.9, beta2=0.98, eps=1e-6, wd=0.2, opt_kwargs=None,
)
device = torch.device(args.device)
vision_cfg = SimpleNamespace(image_size=32, patch_size=8, width=32, layers=2, head_width=16, mlp_ratio=4.0)
text_cfg = SimpleNamespace(context_length=16, vocab_size=100, width=32, heads=2, layers=2)
model = CLIP(32, vision_cfg, text_cfg, output_dict=True)
task = create_task(args, model=model)

# synthetic data (random images/tokens instead of SyntheticDataset's one blank image + one caption)
images = torch.randn(args.train_num_samples, 3, 32, 32)
texts = torch.randint(1, 99, (args.train_num_samples, 16))
texts[:, -1] = 99  # EOT = highest id, pooled by argmax
dataset = [{"image": images[i], "text": texts[i]} for i in range(args.train_num_samples)]
dataloader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True,
                                         generator=torch.Generator().manual_seed(0))

# create optimizer (main.py, native AdamW branch)
opt = getattr(args, 'opt', 'adamw').lower()
use_tensor_learning_rate = (
    args.torchcompile
    and args.torchcompile_strategy == 'step'
    and opt == 'adamw'
    and device.type == 'cuda'
)
exclude = lambda n, p: p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or 'logit_scale' in n
include = lambda n, p: not exclude(n, p)

named_parameters = list(task.trainable_module.named_parameters())
gain_or_bias_params = [p for n, p in named_parameters if exclude(n, p) and p.requires_grad]
rest_params = [p for n, p in named_parameters if include(n, p) and p.requires_grad]

if opt == 'adamw':
    opt_kwargs = dict(
        lr=args.lr,
        betas=(args.beta1, args.beta2),
        eps=args.eps,
        capturable=use_tensor_learning_rate,
    )
    opt_kwargs.update(args.opt_kwargs or {})
    if use_tensor_learning_rate:
        opt_kwargs['capturable'] = True
    optimizer = torch.optim.AdamW(
        [
            {"params": gain_or_bias_params, "weight_decay": 0.},
            {"params": rest_params, "weight_decay": args.wd},
        ],
        **opt_kwargs,
    )
    if use_tensor_learning_rate:
        tensorize_learning_rate(optimizer, device)
else:
    assert False, f'Unknown optimizer {opt}'

if use_tensor_learning_rate:
    pass  # _logger.info('Using tensor learning rate for native AdamW step compile to avoid optimizer-step recompiles.')

total_steps = (len(dataloader) // args.accum_freq) * args.epochs
scheduler = cosine_lr(optimizer, args.lr, args.warmup, total_steps)
state = TrainState(task=task, optimizer=optimizer, scheduler=scheduler)

results = []
for epoch in range(args.epochs):
    state.epoch = epoch
    train_one_epoch(state, dataloader, args, results)
checksum = sum(results) + sum(p.detach().double().sum().item() for p in model.parameters())
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
