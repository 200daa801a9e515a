# OpenTau (TensorAuto/OpenTau) before 1aeed09 (#114): src/opentau/scripts/inference.py compiles
# policy.sample_actions, whose batch carries the prompt strings (and a state that is turned into a
# string of bins) that are formatted and tokenized inside the compiled code.
# Trimmed from src/opentau/policies/pi05/modeling_pi05.py, normalize.py, utils/utils.py.
import logging
import math
from collections import deque
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor, nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


EPS = 1e-8


# --- stand-ins for opentau.configs / transformers ---------------------------------------------
@dataclass
class PI05Config:
    chunk_size: int = 4
    n_action_steps: int = 4
    max_action_dim: int = 8
    max_state_dim: int = 6
    action_dim: int = 5
    num_steps: int = 3
    proj_width: int = 16
    prompt_max_length: int = 24
    predict_response: bool = False
    resize_imgs_with_padding: tuple | None = None
    empty_cameras: int = 0
    image_features: list = field(default_factory=lambda: ["camera0"])
    max_delay: int = 0
    num_cams: int = 1
    resolution: tuple = (8, 8)
    action_chunk: int = 4


class PaliGemmaTokenizerStandIn:
    """Stands in for AutoTokenizer.from_pretrained("google/paligemma-3b-pt-224") (a Rust fast
    tokenizer, which Dynamo cannot trace: it runs as a graph break, as here)."""

    @torch.compiler.disable
    def __call__(self, prompt, padding, padding_side, max_length, return_tensors, truncation):
        ids = torch.zeros(len(prompt), max_length, dtype=torch.long)
        mask = torch.zeros(len(prompt), max_length, dtype=torch.long)
        for i, text in enumerate(prompt):
            toks = [sum(map(ord, w)) % 256 for w in text.replace("<eos>", " <eos> ").split()][:max_length]
            ids[i, : len(toks)] = torch.tensor(toks)
            mask[i, : len(toks)] = 1
        return {"input_ids": ids, "attention_mask": mask}


class Normalize(nn.Module):
    """normalize.py's Normalize / Unnormalize, MEAN_STD only."""

    def __init__(self, keys, dim, inverse=False):
        super().__init__()
        self.keys = keys
        self.inverse = inverse
        self.buffer_mean = nn.Parameter(torch.linspace(-0.1, 0.1, dim), requires_grad=False)
        self.buffer_std = nn.Parameter(torch.linspace(0.5, 1.0, dim), requires_grad=False)

    @torch.no_grad
    def forward(self, batch):
        batch = dict(batch)  # shallow copy avoids mutating the input batch
        for key in self.keys:
            if key not in batch:
                continue
            mean = self.buffer_mean
            std = self.buffer_std
            if self.inverse:
                batch[key] = batch[key] * std + mean
            else:
                batch[key] = (batch[key] - mean) / (std + EPS)
        return batch


def _preferred_dtype():
    return torch.float32 if torch.onnx.is_in_onnx_export() else torch.bfloat16


def create_sinusoidal_pos_embedding(time, dimension, min_period, max_period, device="cpu"):
    if dimension % 2 != 0:
        raise ValueError(f"dimension ({dimension}) must be divisible by 2")
    if time.ndim != 2:
        raise ValueError("The time tensor is expected to be of shape `(batch_size, action_chunk_length)`.")
    fraction = torch.linspace(0.0, 1.0, dimension // 2, dtype=torch.float64, device=device)
    period = min_period * (max_period / min_period) ** fraction
    scaling_factor = 1.0 / period * 2 * math.pi
    sin_input = scaling_factor[None, None, :] * time[:, :, None]
    return torch.cat([torch.sin(sin_input), torch.cos(sin_input)], dim=2)


def make_att_2d_masks(pad_masks, att_masks, n_cross_att_tokens=None, cross_att_pad_masks=None):
    if att_masks.ndim != 2:
        raise ValueError(att_masks.ndim)
    if pad_masks.ndim != 2:
        raise ValueError(pad_masks.ndim)
    cumsum = torch.cumsum(att_masks, dim=1)
    att_2d_masks = cumsum[:, None, :] <= cumsum[:, :, None]
    pad_2d_masks = pad_masks[:, None, :] * pad_masks[:, :, None]
    att_2d_masks = att_2d_masks & pad_2d_masks
    if n_cross_att_tokens is not None:
        cross_att_mask = torch.full(
            (att_masks.size(0), att_masks.size(1), n_cross_att_tokens), True, dtype=torch.bool,
            device=att_masks.device,
        )
        cross_att_mask = cross_att_mask & pad_masks[:, :, None] & cross_att_pad_masks[:, None, :]
        att_2d_masks = torch.cat((cross_att_mask, att_2d_masks), dim=2)
    return att_2d_masks


class PaliGemmaWithExpertStandIn(nn.Module):
    """One attention layer for the VLM prefix (fills the KV cache) and the action expert suffix."""

    def __init__(self, width):
        super().__init__()
        self.patch = nn.Linear(3 * 4 * 4, width)
        self.embed_tokens = nn.Embedding(256, width)
        self.qkv = nn.ModuleList([nn.Linear(width, 3 * width), nn.Linear(width, 3 * width)])
        self.ada = nn.Linear(width, width)

    def embed_image(self, img):
        b = img.shape[0]
        patches = img.unfold(2, 4, 4).unfold(3, 4, 4).permute(0, 2, 3, 1, 4, 5).reshape(b, -1, 48)
        return self.patch(patches)

    def embed_language_tokens(self, tokens):
        return self.embed_tokens(tokens)

    def forward(self, attention_mask, position_ids, past_key_values, inputs_embeds, n_cross_att_tokens=None,
                use_cache=False, fill_kv_cache=False, adarms_cond=None):
        if fill_kv_cache:
            x = inputs_embeds[0]
            q, k, v = self.qkv[0](x).chunk(3, dim=-1)
            past_key_values = {"key_states": k, "value_states": v}
        else:
            x = inputs_embeds[1] * (1 + self.ada(adarms_cond[1]))[:, None, :]
            q, k, v = self.qkv[1](x).chunk(3, dim=-1)
            k = torch.cat([past_key_values["key_states"], k], dim=1)
            v = torch.cat([past_key_values["value_states"], v], dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
        return ([out, None] if fill_kv_cache else [None, out]), past_key_values


class PI05FlowMatching(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.paligemma_with_expert = PaliGemmaWithExpertStandIn(config.proj_width)
        self.action_in_proj = nn.Linear(config.max_action_dim, config.proj_width)
        self.action_out_proj = nn.Linear(config.proj_width, config.max_action_dim)
        self.time_mlp_in = nn.Linear(config.proj_width, config.proj_width)
        self.time_mlp_out = nn.Linear(config.proj_width, config.proj_width)

    def sample_noise(self, shape, device):
        noise = torch.normal(mean=0.0, std=1.0, size=shape, dtype=torch.float32, device=device)
        return noise

    def embed_prefix(self, images, img_masks, lang_tokens, lang_masks):
        embs = []
        pad_masks = []
        att_masks = []
        for img, img_mask in zip(images, img_masks, strict=False):
            img_emb = self.paligemma_with_expert.embed_image(img)
            img_emb = img_emb.to(dtype=_preferred_dtype())
            bsize, num_img_embs = img_emb.shape[:2]
            img_mask = img_mask[:, None].expand(bsize, num_img_embs)
            embs.append(img_emb)
            pad_masks.append(img_mask)
            att_masks += [0] * num_img_embs
        lang_emb = self.paligemma_with_expert.embed_language_tokens(lang_tokens)
        lang_emb_dim = lang_emb.shape[-1]
        lang_emb = lang_emb * math.sqrt(lang_emb_dim)
        embs.append(lang_emb)
        pad_masks.append(lang_masks)
        num_lang_embs = lang_emb.shape[1]
        att_masks += [0] * num_lang_embs
        embs = torch.cat(embs, dim=1)
        pad_masks = torch.cat(pad_masks, dim=1)
        att_masks = torch.tensor(att_masks, dtype=torch.bool, device=pad_masks.device)
        att_masks = att_masks[None, :].expand(bsize, len(att_masks))
        return embs, pad_masks, att_masks

    def embed_suffix(self, noisy_actions, timestep):
        embs = []
        pad_masks = []
        att_masks = []
        dtype = _preferred_dtype()
        device = noisy_actions.device
        time_emb = create_sinusoidal_pos_embedding(
            timestep, self.config.proj_width, min_period=4e-3, max_period=4.0, device=device
        )
        noisy_actions = noisy_actions.to(dtype=dtype)
        action_emb = self.action_in_proj(noisy_actions)

        def time_mlp_func(time_emb):
            x = self.time_mlp_in(time_emb)
            x = F.silu(x)
            x = self.time_mlp_out(x)
            return F.silu(x)

        time_emb = time_emb.to(dtype=dtype)
        adarms_cond = time_mlp_func(time_emb).mean(dim=1)
        embs.append(action_emb)
        bsize, action_dim = action_emb.shape[:2]
        action_mask = torch.ones(bsize, action_dim, dtype=torch.bool, device=device)
        pad_masks.append(action_mask)
        att_masks += [1] + ([0] * (self.config.n_action_steps - 1))
        embs = torch.cat(embs, dim=1)
        pad_masks = torch.cat(pad_masks, dim=1)
        att_masks = torch.tensor(att_masks, dtype=embs.dtype, device=embs.device)
        att_masks = att_masks[None, :].expand(bsize, len(att_masks))
        return embs, pad_masks, att_masks, adarms_cond

    def sample_actions(self, images, img_masks, lang_tokens, lang_masks, action_prefix, delay, noise=None):
        bsize = lang_tokens.shape[0]
        device = lang_tokens.device
        if noise is None:
            actions_shape = (bsize, self.config.chunk_size, self.config.max_action_dim)
            noise = self.sample_noise(actions_shape, device)
        prefix_embs, prefix_pad_masks, prefix_att_masks = self.embed_prefix(
            images, img_masks, lang_tokens, lang_masks
        )
        prefix_att_2d_masks = make_att_2d_masks(prefix_pad_masks, prefix_att_masks)
        prefix_position_ids = torch.cumsum(prefix_pad_masks, dim=1) - 1
        num_cross_att_tokens = prefix_embs.shape[1]
        (prefix_out, _), past_key_values = self.paligemma_with_expert.forward(
            attention_mask=prefix_att_2d_masks,
            position_ids=prefix_position_ids,
            past_key_values=None,
            inputs_embeds=[prefix_embs, None],
            n_cross_att_tokens=num_cross_att_tokens,
            use_cache=False,
            fill_kv_cache=True,
        )
        # perform denoising steps to get the action
        dt = -1.0 / self.config.num_steps
        dt = torch.tensor(dt, dtype=torch.float32, device=device)
        x_t = noise
        time = torch.tensor(1.0, dtype=torch.float32, device=device)
        prefix_mask = torch.arange(self.config.chunk_size, device=device)[None, :] < delay
        while time >= -dt / 2:
            x_t = torch.where(prefix_mask[:, :, None], action_prefix, x_t)
            masked_time = torch.where(prefix_mask, 0, time)
            v_t = self.denoise_step(prefix_pad_masks, past_key_values, x_t, masked_time)
            # Euler step
            x_t += dt * v_t
            time += dt
        x_t = torch.where(prefix_mask[:, :, None], action_prefix, x_t)
        return x_t

    def denoise_step(self, prefix_pad_masks, past_key_values, x_t, time):
        suffix_embs, suffix_pad_masks, suffix_att_masks, adarms_cond = self.embed_suffix(x_t, time)
        num_cross_att_tokens = prefix_pad_masks.shape[1]
        action_expert_2d_attention_mask = make_att_2d_masks(
            suffix_pad_masks,
            suffix_att_masks,
            n_cross_att_tokens=num_cross_att_tokens,
            cross_att_pad_masks=prefix_pad_masks[:, :num_cross_att_tokens],
        )
        prefix_offsets = torch.sum(prefix_pad_masks, dim=-1)[:, None]
        action_expert_position_ids = prefix_offsets + torch.cumsum(suffix_pad_masks, dim=1) - 1
        outputs_embeds, _ = self.paligemma_with_expert.forward(
            attention_mask=action_expert_2d_attention_mask,
            position_ids=action_expert_position_ids,
            past_key_values=past_key_values,
            inputs_embeds=[None, suffix_embs],
            use_cache=True,
            fill_kv_cache=False,
            adarms_cond=[None, adarms_cond],
        )
        suffix_out = outputs_embeds[1]
        suffix_out = suffix_out[:, -self.config.n_action_steps :]
        v_t = self.action_out_proj(suffix_out)
        v_t = v_t.to(dtype=torch.float32)
        return v_t


class PI05Policy(nn.Module):
    name = "pi05"

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.normalize_inputs = Normalize(["state"], config.max_state_dim)
        self.unnormalize_outputs = Normalize(["actions"], config.action_dim, inverse=True)
        self.language_tokenizer = PaliGemmaTokenizerStandIn()
        self.model = PI05FlowMatching(config)
        self.reset()

    def reset(self):
        self._action_queue = deque([], maxlen=self.config.n_action_steps)

    @torch.no_grad()
    def sample_actions(self, batch, action_prefix=None, delay=None, noise=None):
        assert delay is None or 0 <= delay.item() <= self.config.max_delay, (
            f"Delay must be None or between 0 and {self.config.max_delay}"
        )
        batch = self.normalize_inputs(batch)
        images, img_masks = self.prepare_images(batch)
        lang_tokens, lang_masks = self.prepare_language(batch)
        if delay is None:
            delay = torch.tensor(0, dtype=torch.long, device=lang_tokens.device)
        if action_prefix is None:
            bsize = lang_tokens.shape[0]
            actions_shape = (bsize, self.config.chunk_size, self.config.max_action_dim)
            action_prefix = torch.zeros(actions_shape, dtype=lang_tokens.dtype, device=lang_tokens.device)
        actions = self.model.sample_actions(
            images,
            img_masks,
            lang_tokens,
            lang_masks,
            action_prefix,
            delay,
            noise=noise,
        )
        # Unpad actions
        original_action_dim = self.config.action_dim
        actions = actions[:, :, :original_action_dim]
        actions = self.unnormalize_outputs({"actions": actions})["actions"]
        return actions

    def prepare_discrete_state(self, batch):
        state = batch["state"]
        state_cpu = state.to(device="cpu", dtype=torch.float32)
        if torch.any(state_cpu < -1.0) or torch.any(state_cpu > 1.0):
            logging.warning(
                f"State values are not normalized between -1 and 1. Min: {state_cpu.min().item()}, Max: {state_cpu.max().item()}"
            )
        state_clipped = torch.clamp(state_cpu, -1.0, 1.0)
        # replicate np.digitize with torch for torch.compile compatibility
        bin_indices = ((state_clipped + 1.0) * 128.0).long().clamp(0, 255)
        discretized_states = bin_indices.cpu().tolist()
        return [" ".join(map(str, row)) for row in discretized_states]

    def prepare_images(self, batch):
        images = []
        img_masks = []
        present_img_keys = [key for key in self.config.image_features if key in batch]
        for key in present_img_keys:
            img = batch[key]
            # Normalize from range [0,1] to [-1,1] as expected by siglip
            img = img * 2.0 - 1.0
            bsize = img.shape[0]
            device = img.device
            mask = torch.ones(bsize, dtype=torch.bool, device=device)
            images.append(img)
            img_masks.append(mask)
        return images, img_masks

    def prepare_language(self, batch):
        device = batch["state"].device
        tasks = batch["prompt"]
        # add state to the prompt
        state = self.prepare_discrete_state(batch)
        # using <eos> to separate each modality
        if self.config.predict_response:
            prompt = [
                f"Task: {task}<eos>State: {state}<eos>Response:"
                for task, state in zip(tasks, state, strict=False)
            ]
        else:
            prompt = [
                f"Task: {task}<eos>State: {state}<eos>Actions:"
                for task, state in zip(tasks, state, strict=False)
            ]
        tokenized_prompt = self.language_tokenizer.__call__(
            prompt,
            padding="max_length",
            padding_side="right",
            max_length=self.config.prompt_max_length,
            return_tensors="pt",
            truncation=True,
        )
        lang_tokens = tokenized_prompt["input_ids"].to(device=device)
        lang_masks = tokenized_prompt["attention_mask"].to(device=device, dtype=torch.bool)
        return lang_tokens, lang_masks


def attempt_torch_compile(fn, device_hint=None):
    if device_hint and "mps" in str(device_hint):
        logging.warning("torch.compile is experimental on MPS devices. Compilation skipped.")
        return fn
    if hasattr(torch, "compile"):
        logging.info("Attempting to compile the policy with torch.compile()...")
        try:
            fn = torch.compile(fn, backend=counting_backend)  # real: mode="max-autotune"
            logging.info("Policy compiled successfully.")
        except Exception as e:
            logging.warning(f"torch.compile failed with error: {e}. Proceeding without compilation.")
    return fn


def create_dummy_observation(cfg, device, dtype=torch.bfloat16, prompt="Pick up yellow lego block and put it in the bin", state=None):
    camera_observations = {
        f"camera{i}": torch.zeros((1, 3, *cfg.resolution), dtype=dtype, device=device)
        for i in range(cfg.num_cams)
    }
    return {
        **camera_observations,
        "state": torch.zeros((1, cfg.max_state_dim), dtype=dtype, device=device) if state is None else state,
        "prompt": [prompt],
        "img_is_pad": torch.zeros((1, cfg.num_cams), dtype=torch.bool, device=device),
        "action_is_pad": torch.zeros((1, cfg.action_chunk), dtype=torch.bool, device=device),
    }


def inference_main(cfg):
    device = torch.device("cpu")
    torch.manual_seed(0)
    policy = PI05Policy(cfg)
    policy.to(device=device, dtype=torch.bfloat16)
    policy.eval()
    policy.sample_actions = attempt_torch_compile(policy.sample_actions, device_hint=device)

    policy.reset()
    observation = create_dummy_observation(cfg, device, dtype=torch.bfloat16)

    # a deployed policy (e.g. scripts/grpc/server.py) sees another task prompt each episode and
    # another robot state each step; the script's dummy observation keeps one of each
    prompts = ["Pick up yellow lego block and put it in the bin", "Open the drawer", "Stack the red cup"]
    observations = []
    for i in range(6):
        state = torch.linspace(-0.5, 0.5, cfg.max_state_dim, dtype=torch.bfloat16) * (i % 3) / 2
        observations.append(
            create_dummy_observation(cfg, device, torch.bfloat16, prompt=prompts[i // 2], state=state[None])
        )

    checksum = 0.0
    with torch.inference_mode():
        # two warmup calls are needed right after compiling
        _ = policy.sample_actions(observation)
        _ = policy.sample_actions(observation)
        for i, obs in enumerate(observations):
            torch.manual_seed(i)
            actions = policy.sample_actions(obs)
            checksum += actions.float().sum().item()
    return checksum


if __name__ == "__main__":
    out = inference_main(PI05Config())
    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {out:.4f}")
