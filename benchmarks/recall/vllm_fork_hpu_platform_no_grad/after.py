"""HabanaAI/vllm-fork 89e6254b4 (PR #1691), the fix applied: the `HpuPlatform.inference_mode()`
override (`return torch.no_grad()`, vllm/platforms/hpu.py) is removed, so the tensor-parallel
worker loop (`LocalOrDistributedWorkerBase.start_worker_execution_loop`) runs under the base
`Platform.inference_mode()` (`torch.inference_mode(mode=True)`) and receives its broadcast inputs
as inference tensors, like the ones `HPUModelRunner.warmup_model` compiled the regions with.

Same trimmed CPU reproduction as before.py (see there)."""
import collections
import dataclasses
from typing import Any, Dict, List, Optional

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# --- vllm/platforms -----------------------------------------------------------


class Platform:  # vllm/platforms/interface.py

    @classmethod
    def inference_mode(cls):
        """A device-specific wrapper of `torch.inference_mode`.

        This wrapper is recommended because some hardware backends such as TPU
        do not support `torch.inference_mode`. In such a case, they will fall
        back to `torch.no_grad` by overriding this method.
        """
        return torch.inference_mode(mode=True)


class HpuPlatform(Platform):  # vllm/platforms/hpu.py
    device_name: str = "hpu"

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return cls.device_name


current_platform = HpuPlatform()


# --- vllm/distributed: broadcast_tensor_dict (receive side of rank 1) ----------


@dataclasses.dataclass
class TensorMetadata:
    device: str
    dtype: torch.dtype
    size: torch.Size


_DRIVER_SENDS: "collections.deque" = collections.deque()  # stand-in for the collectives


def broadcast_tensor_dict(tensor_dict: Optional[Dict[str, Any]] = None, src: int = 0):
    # GroupCoordinator.broadcast_tensor_dict, rank_in_group != src
    metadata_list, payload = _DRIVER_SENDS.popleft()  # broadcast_object(None, src=src)
    tensor_dict = {}
    for key, value in metadata_list:
        if isinstance(value, TensorMetadata):
            tensor = torch.empty(value.size, dtype=value.dtype, device=value.device)
            tensor.copy_(payload[key])  # torch.distributed.broadcast(tensor, src=...)
            tensor_dict[key] = tensor
        else:
            tensor_dict[key] = value
    return tensor_dict


def driver_broadcast(tensor_dict):  # what rank 0 sends (_split_tensor_dict)
    metadata_list, payload = [], {}
    for key, value in tensor_dict.items():
        if isinstance(value, torch.Tensor):
            metadata_list.append((key, TensorMetadata(value.device.type, value.dtype, value.size())))
            payload[key] = value
        else:
            metadata_list.append((key, value))
    _DRIVER_SENDS.append((metadata_list, payload))


# --- model (tiny Llama; regions compiled like on HPU) --------------------------


class VocabParallelEmbedding(torch.nn.Embedding):
    pass


class RMSNorm(torch.nn.Module):

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.variance_epsilon) * self.weight


class LlamaDecoderLayer(torch.nn.Module):

    def __init__(self, hidden):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, hidden)
        self.mlp = torch.nn.Linear(hidden, hidden)

    def forward(self, positions, hidden_states):
        inv_freq = 1.0 / (10000 ** (torch.arange(0, hidden_states.shape[-1], dtype=torch.float32)
                                    / hidden_states.shape[-1]))
        rot = torch.cos(positions.unsqueeze(-1).float() * inv_freq)
        h = self.qkv(self.input_layernorm(hidden_states)) * rot
        return hidden_states + self.mlp(torch.nn.functional.silu(h))


class LlamaModel(torch.nn.Module):

    def __init__(self, vocab=32, hidden=16, layers=2):
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(vocab, hidden)
        self.layers = torch.nn.ModuleList(LlamaDecoderLayer(hidden) for _ in range(layers))
        self.norm = RMSNorm(hidden)

    def forward(self, input_ids, positions):
        hidden_states = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden_states = layer(positions, hidden_states)
        return self.norm(hidden_states)


class HpuModelAdapter(torch.nn.Module):  # vllm/worker/hpu_model_runner.py (trimmed)

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args, **kwargs):
        kwargs = kwargs.copy()
        selected_token_indices = kwargs.pop('selected_token_indices')
        if 'warmup_mode' in kwargs:
            kwargs.pop('warmup_mode')
        if 'kv_caches' in kwargs:
            kwargs.pop('kv_caches')
        hidden_states = self.model(*args, **kwargs)
        hidden_states = hidden_states.view(-1, hidden_states.shape[-1])
        if selected_token_indices is not None:
            hidden_states = hidden_states.index_select(0, selected_token_indices)
        return hidden_states


# --- vllm/worker/hpu_model_runner.py (trimmed) ---------------------------------


@dataclasses.dataclass
class ModelInputForHPU:
    input_tokens: Optional[torch.Tensor] = None
    input_positions: Optional[torch.Tensor] = None
    selected_token_indices: Optional[torch.Tensor] = None
    virtual_engine: int = 0

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "input_positions": self.input_positions,
            "selected_token_indices": self.selected_token_indices,
            "virtual_engine": self.virtual_engine,
        }

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict: Dict[str, Any]) -> "ModelInputForHPU":
        return cls(**{k: tensor_dict[k] for k in
                      ("input_tokens", "input_positions", "selected_token_indices", "virtual_engine")})


class HPUModelRunner:

    def __init__(self, model, buckets):
        self.model = HpuModelAdapter(model)
        self.buckets = buckets  # (batch_size, seq_len) decode buckets
        self.regional_compilation_layers_list = [RMSNorm, VocabParallelEmbedding]
        self._maybe_compile()

    def _maybe_compile(self):
        self._regional_compilation(self.model)

    def _regional_compilation(self, module, parent_module=None, module_name=None):
        if isinstance(module, torch.nn.ModuleList):
            for children_name, children_module in module.named_children():
                self._compile_region(module, children_name, children_module)
        elif any(isinstance(module, layer) for layer in self.regional_compilation_layers_list):
            self._compile_region(parent_module, module_name, module)
        else:
            for children_name, children_module in module.named_children():
                self._regional_compilation(children_module, module, children_name)

    def _compile_region(self, model, name, module):
        module = self._compile(module)
        setattr(model, name, module)

    def _compile(self, module):
        return torch.compile(module, backend=counting_backend, fullgraph=False, dynamic=False)

    @torch.inference_mode()
    def prepare_model_input(self, batch_size, seq_len, offset) -> ModelInputForHPU:
        input_tokens = (torch.arange(batch_size * seq_len).view(batch_size, seq_len) + offset) % 32
        input_positions = torch.full((batch_size, seq_len), offset % 7, dtype=torch.long)
        selected_token_indices = torch.arange(batch_size) * seq_len + seq_len - 1
        return ModelInputForHPU(input_tokens, input_positions, selected_token_indices)

    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict):
        return ModelInputForHPU.from_broadcasted_tensor_dict(tensor_dict)

    def warmup_scenario(self, batch_size, seq_len, kv_caches, num_iters=3):
        for i in range(num_iters):
            inputs = self.prepare_model_input(batch_size, seq_len, offset=i)
            self.execute_model(inputs, kv_caches, warmup_mode=True)

    @torch.inference_mode()
    def warmup_model(self, kv_caches: List[torch.Tensor]) -> None:
        for batch_size, seq_len in self.buckets:
            self.warmup_scenario(batch_size, seq_len, kv_caches)

    @torch.inference_mode()
    def execute_model(self, model_input: ModelInputForHPU, kv_caches, warmup_mode=False):
        execute_model_kwargs = {
            "input_ids": model_input.input_tokens,
            "positions": model_input.input_positions,
            "kv_caches": kv_caches,
        }
        hidden_states = self.model.forward(**execute_model_kwargs,
                                           selected_token_indices=model_input.selected_token_indices,
                                           warmup_mode=warmup_mode)
        return [hidden_states]


# --- vllm/worker/worker_base.py + hpu_worker.py (trimmed) ----------------------


@dataclasses.dataclass
class WorkerInput:
    num_seq_groups: Optional[int] = None
    virtual_engine: int = 0

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        return cls(num_seq_groups=tensor_dict.pop("num_seq_groups"),
                   virtual_engine=tensor_dict["virtual_engine"])


class LocalOrDistributedWorkerBase:
    is_driver_worker = False
    do_metadata_broadcast = True
    current_platform = current_platform

    def start_worker_execution_loop(self) -> None:
        """Execute model loop in parallel worker.

        You can stop the loop by executing a driver worker with an empty output.
        See `stop_remote_worker_execution_loop` for more details.
        """
        with self.current_platform.inference_mode():
            while True:
                output = self.execute_model(execute_model_req=None)
                if output is None:
                    return None

    def _get_worker_input_from_broadcast(self):
        """ Get the worker input from the broadcasted tensor dict. """
        assert self.do_metadata_broadcast
        assert not self.is_driver_worker
        broadcast_data = broadcast_tensor_dict(src=0)
        if not broadcast_data:
            return None
        worker_input = WorkerInput.from_broadcasted_tensor_dict(broadcast_data)
        model_input = self.model_runner.make_model_input_from_broadcasted_tensor_dict(broadcast_data)
        return model_input, worker_input, {}

    def prepare_input(self, execute_model_req=None):
        return self._get_worker_input_from_broadcast()

    def execute_model(self, execute_model_req=None):
        inputs = self.prepare_input(execute_model_req)
        broadcast_data = broadcast_tensor_dict(src=0)
        if "is_dummy_batch" in broadcast_data and broadcast_data["is_dummy_batch"]:
            return []
        if inputs is None:
            return None
        model_input, worker_input, kwargs = inputs
        if worker_input.num_seq_groups == 0:
            return []
        output = self.model_runner.execute_model(model_input=model_input,
                                                 kv_caches=self.kv_cache[worker_input.virtual_engine])
        OUTPUTS.append(output[0].sum().item())
        return output


class HPUWorker(LocalOrDistributedWorkerBase):

    def __init__(self, model_runner):
        self.model_runner = model_runner
        self.hpu_cache = None

    @property
    def kv_cache(self):
        return self.hpu_cache

    def initialize_cache(self, num_gpu_blocks):
        self.hpu_cache = [[torch.zeros(num_gpu_blocks, 4)]]  # _init_cache_engine
        self._warm_up_model()

    def _warm_up_model(self) -> None:
        self.model_runner.warmup_model(self.hpu_cache[0])


OUTPUTS: List[float] = []

torch.manual_seed(0)
buckets = [(2, 1), (2, 4)]  # (batch_size, seq_len)
worker = HPUWorker(HPUModelRunner(LlamaModel().eval(), buckets))
worker.initialize_cache(num_gpu_blocks=8)

# rank 0 (driver) serves requests of the warmed-up buckets and broadcasts them
driver_runner = worker.model_runner
for step, (bs, seq) in enumerate([(2, 4), (2, 1), (2, 1), (2, 4), (2, 1)]):
    model_input = driver_runner.prepare_model_input(bs, seq, offset=step + 3)
    data = {"num_seq_groups": bs}
    data.update(model_input.as_broadcastable_tensor_dict())
    driver_broadcast(data)
    driver_broadcast({"is_dummy_batch": False})
driver_broadcast({})  # stop_remote_worker_execution_loop: empty input
driver_broadcast({"is_dummy_batch": False})

worker.start_worker_execution_loop()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {sum(OUTPUTS):.4f}")
