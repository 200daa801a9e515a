# xDiT (xdit-project/xDiT) before 17f8de3 (#678 "Fix data parallel compile"):
# xfuser/model_executor/models/runner_models/base_model.py. With data parallelism, xFuserModel.run() shards the
# prompts across DP groups (_split_prompts_for_dp), but initialize() warmed up torch.compile with the unsplit
# prompt list, so the compiled transformer was traced for the full batch and recompiles on the first real run.
# Trimmed from base_model.py, runner_models/flux.py and runner.py; diffusers' FluxPipeline and the distributed
# helpers are stood in.
import abc
import copy
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import torch
from torch import nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


def log(msg):
    pass


# --- stand-ins for xfuser.core.distributed (one process: DP rank 0 of 2) ---------------------------
DP_WORLD_SIZE = 2


def get_data_parallel_world_size():
    return DP_WORLD_SIZE


def get_data_parallel_rank():
    return 0


# --- stand-in for diffusers' FluxPipeline / FluxTransformer2DModel ---------------------------------
class FluxTransformer2DModel(nn.Module):
    def __init__(self, dim=16, in_channels=8):
        super().__init__()
        self.x_embedder = nn.Linear(in_channels, dim)
        self.context_embedder = nn.Linear(dim, dim)
        self.time_embed = nn.Linear(1, dim)
        self.guidance_embed = nn.Linear(1, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj_out = nn.Linear(dim, in_channels)

    def forward(self, hidden_states, encoder_hidden_states, timestep, guidance):
        temb = self.time_embed(timestep[:, None]) + self.guidance_embed(guidance[:, None])
        x = self.x_embedder(hidden_states) + temb[:, None]
        c = self.context_embedder(encoder_hidden_states)
        seq = torch.cat([c, x], dim=1)
        q, k, v = self.qkv(seq).chunk(3, dim=-1)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj_out(out[:, c.shape[1]:])


class FluxPipelineOutput:
    def __init__(self, images):
        self.images = images


class FluxPipeline:
    def __init__(self):
        torch.manual_seed(0)
        self.transformer = FluxTransformer2DModel()
        self.vocab = nn.Embedding(128, 16)

    def encode_prompt(self, prompt, max_sequence_length):
        ids = torch.zeros(len(prompt), max_sequence_length, dtype=torch.long)
        for i, p in enumerate(prompt):
            toks = [sum(map(ord, w)) % 128 for w in p.split()][:max_sequence_length]
            ids[i, : len(toks)] = torch.tensor(toks)
        return self.vocab(ids)

    @torch.no_grad()
    def __call__(self, height, width, prompt, num_inference_steps, guidance_scale, max_sequence_length, generator):
        prompt = [prompt] if isinstance(prompt, str) else prompt
        batch_size = len(prompt)
        prompt_embeds = self.encode_prompt(prompt, max_sequence_length)
        latents = torch.randn(batch_size, (height // 16) * (width // 16), 8, generator=generator)
        guidance = torch.full([batch_size], guidance_scale)
        timesteps = torch.linspace(1.0, 1.0 / num_inference_steps, num_inference_steps)
        for i, t in enumerate(timesteps):
            timestep = t.expand(latents.shape[0])
            noise_pred = self.transformer(
                hidden_states=latents, encoder_hidden_states=prompt_embeds, timestep=timestep, guidance=guidance
            )
            latents = latents - noise_pred / num_inference_steps
        return FluxPipelineOutput(images=list(latents))


# --- xfuser/model_executor/models/runner_models/base_model.py (trimmed) ---------------------------
@dataclass
class xFuserArgs:
    model: str = "FLUX.1-dev"
    use_torch_compile: bool = True
    data_parallel_degree: int = DP_WORLD_SIZE
    batch_size: Optional[int] = None
    warmup_calls: int = 0
    num_iterations: int = 2


class DiffusionOutput:
    """ Class to encapsulate diffusion model outputs """

    def __init__(self, images=None, pipe_args=None) -> None:
        self.images = images or []
        self.pipe_args = pipe_args

    @classmethod
    def from_outputs(cls, outputs, output_type):
        return cls(images=[img for o in outputs for img in o.images])


MODEL_REGISTRY = {}


def register_model(name: str) -> Callable:
    """ Decorator to register a model in the registry. """
    def decorator(cls):
        MODEL_REGISTRY[name] = cls
        return cls
    return decorator


class xFuserModel(abc.ABC):
    def __init__(self, config: xFuserArgs) -> None:
        self.config = config
        self.pipe = None

    def initialize(self, input_args: dict) -> None:
        """ Load the model pipeline """
        log("Loading model pipeline...")
        self.pipe = self._load_model()

        if self.config.use_torch_compile:
            log("Torch.compile enabled. Warming up torch compiler ...")
            compile_input_args = copy.deepcopy(input_args)
            if self.config.batch_size and isinstance(compile_input_args.get("prompt"), list):
                compile_input_args["prompt"] = compile_input_args["prompt"][: self.config.batch_size]
            self._compile_model(compile_input_args)

    def _compile_model(self, input_args: dict) -> None:
        """ Compile the model using torch.compile."""
        self.pipe.transformer = torch.compile(self.pipe.transformer, backend=counting_backend)  # real: mode="default"
        # two steps to warmup the torch compiler
        input_args["num_inference_steps"] = 2  # Reduce steps for warmup # TODO: make this more generic
        self._run_timed_pipe(input_args)

    def run(self, input_args: dict) -> Tuple[DiffusionOutput, list]:
        """ Run the model with given input arguments and return output and timings """
        input_args = self._split_prompts_for_dp(input_args)
        timings = []
        output: DiffusionOutput = None

        if self.config.warmup_calls:
            warmup_args = copy.deepcopy(input_args)
            if self.config.batch_size and isinstance(warmup_args.get("prompt"), list):
                warmup_args["prompt"] = warmup_args["prompt"][: self.config.batch_size]
            self._run_warmup_calls(warmup_args)

        for iteration in range(self.config.num_iterations):
            log(f"Running iteration {iteration + 1}/{self.config.num_iterations}")
            if self.config.batch_size:  # Run in batched mode
                output, batch_timings = self._run_pipe_batched(input_args)
                timings += batch_timings
            else:  # Run all in one go
                output, timing = self._run_timed_pipe(input_args)
                timings.append(timing)

        output = self._gather_dp_outputs(output)
        return output, timings

    def _run_pipe_batched(self, input_args: dict):
        """ Run the pipeline in batches """
        batch_size = self.config.batch_size
        all_prompts = input_args["prompt"]
        timings = []
        all_outputs = []
        batch_count = len(all_prompts) // batch_size + (1 if len(all_prompts) % batch_size != 0 else 0)
        for batch_index in range(0, batch_count):
            batch_args = copy.deepcopy(input_args)
            prompts = batch_args["prompt"][batch_index * batch_size:(batch_index + 1) * batch_size]
            batch_args["prompt"] = prompts
            output, timing = self._run_timed_pipe(batch_args)
            timings.append(timing)
            all_outputs.append(output)
        return DiffusionOutput.from_outputs(all_outputs, "image"), timings

    def _run_warmup_calls(self, input_args: dict) -> None:
        """ Run initial warmup calls if specified """
        if self.config.warmup_calls:
            for iteration in range(self.config.warmup_calls):
                self._run_timed_pipe(input_args)

    def _run_timed_pipe(self, input_args: dict):
        """ Run a a full pipeline with timing information """
        start = time.perf_counter()  # real: torch.cuda.Event(enable_timing=True)
        out = self._run_pipe(input_args)
        elapsed_time = time.perf_counter() - start
        return out, elapsed_time

    @abc.abstractmethod
    def _run_pipe(self, input_args: dict) -> DiffusionOutput:
        """ Execute the pipeline. Must be implemented by subclasses. """

    @abc.abstractmethod
    def _load_model(self):
        """ Load the model. Must be implemented by subclasses. """

    def _split_prompts_for_dp(self, input_args: dict) -> dict:
        """Shard prompts across data-parallel groups so each group processes a subset."""
        if self.config.data_parallel_degree == 1:
            return input_args

        dp_world_size = get_data_parallel_world_size()
        dp_rank = get_data_parallel_rank()
        prompts = input_args.get("prompt")
        negative_prompts = input_args.get("negative_prompt")

        if isinstance(prompts, str):
            log(f"Single prompt with dp_world_size={dp_world_size}: all DP groups will process the same prompt.")
            return input_args

        if len(prompts) < dp_world_size:
            raise ValueError(
                f"Number of prompts ({len(prompts)}) is less than data_parallel_world_size ({dp_world_size}). "
            )

        local_prompts = prompts[dp_rank::dp_world_size]
        if isinstance(negative_prompts, list) and len(negative_prompts) != 1:
            local_negative_prompts = negative_prompts[dp_rank::dp_world_size]
        else:
            local_negative_prompts = negative_prompts
        log(f"Each DP group will process {len(local_prompts)} prompts out of {len(prompts)} total prompts.")

        split_args = copy.copy(input_args)
        split_args["prompt"] = local_prompts
        split_args["negative_prompt"] = local_negative_prompts
        return split_args

    def _gather_dp_outputs(self, output: DiffusionOutput) -> Optional[DiffusionOutput]:
        """ (real: torch.distributed.gather_object onto the last rank; one process here) """
        return output


# --- xfuser/model_executor/models/runner_models/flux.py (trimmed) ---------------------------------
@register_model("FLUX.1-dev")
class xFuserFluxModel(xFuserModel):
    def _load_model(self):
        return FluxPipeline()

    def _run_pipe(self, input_args: dict) -> DiffusionOutput:
        output = self.pipe(
            height=input_args["height"],
            width=input_args["width"],
            prompt=input_args["prompt"],
            num_inference_steps=input_args["num_inference_steps"],
            guidance_scale=input_args["guidance_scale"],
            max_sequence_length=input_args["max_sequence_length"],
            generator=torch.Generator(device="cpu").manual_seed(input_args["seed"]),  # real: device="cuda"
        )
        images = output.images if output else []  # For legacy pipelines
        return DiffusionOutput(images=images, pipe_args=input_args)


# --- xfuser/runner.py: initialize(input_args), then run(input_args) ---------------------------------
if __name__ == "__main__":
    config = xFuserArgs()
    model = MODEL_REGISTRY[config.model](config)
    input_args = {
        "prompt": ["A cat holding a sign", "A red fox in snow", "A lighthouse at dusk", "A bowl of ramen"],
        "negative_prompt": None,
        "height": 64,
        "width": 64,
        "num_inference_steps": 4,
        "guidance_scale": 3.5,
        "max_sequence_length": 8,
        "seed": 42,
    }
    model.initialize(input_args)
    output, timings = model.run(input_args)
    checksum = sum(img.sum().item() for img in output.images)
    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {checksum:.4f}")
