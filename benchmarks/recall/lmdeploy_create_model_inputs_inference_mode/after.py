# lmdeploy (InternLM/lmdeploy) after PR #3417 "fix tensor dispatch in dynamo" (2b641b85e): the fix puts
# `@torch.inference_mode()` on `Engine.create_model_inputs` and `ModelInputs.to_device`.
# Reduced from lmdeploy/pytorch/engine/engine.py, lmdeploy/pytorch/engine/model_agent.py,
# lmdeploy/pytorch/model_inputs.py and lmdeploy/pytorch/backends/dlinfer/ascend/graph_runner.py
# (CPU, one process, tp = 1). `Engine.create_model_inputs` and `ModelInputs.to_device` run outside
# inference mode (the `@torch.inference_mode()` on the `async def` engine loop only covers making the
# coroutine), so the step's first `input_ids` is a normal tensor and the sampled next tokens fed back by
# `inputs.update(...)` are inference tensors: the compiled model's dispatch-key guard fails.
import asyncio
from dataclasses import dataclass, fields

import torch
from torch import nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---------------------------------------------------------------- lmdeploy/pytorch/model_inputs.py
@dataclass
class ModelInputs:
    """Input of the model."""
    input_ids: torch.LongTensor
    seq_length: torch.LongTensor
    history_lengths: torch.LongTensor
    is_decoding: bool

    def update(self, input_ids: torch.LongTensor):
        """update input ids."""
        assert self.is_decoding
        self.history_lengths = self.history_lengths + 1
        if input_ids.dim() == 1:
            input_ids = input_ids[None, :]
        self.input_ids = input_ids
        return self

    @torch.inference_mode()
    def to_device(self, device: str, non_blocking: bool = False):
        """to device."""
        out_dict = dict()
        for f in fields(self):
            k = f.name
            v = getattr(self, k)
            if isinstance(v, torch.Tensor):
                v = v.to(device, non_blocking=non_blocking)
            out_dict[k] = v

        return ModelInputs(**out_dict)


# ---------------------------------------------------------------- stand-in for the patched HF model
class ToyForCausalLM(nn.Module):
    """Stand-in for an lmdeploy-patched decoder (embedding + one mixing layer + lm head)."""

    def __init__(self, vocab=64, hidden=16):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.embed_tokens = nn.Parameter(torch.randn(vocab, hidden, generator=g) * 0.5, requires_grad=False)
        self.pos = nn.Parameter(torch.randn(512, hidden, generator=g) * 0.1, requires_grad=False)
        self.proj = nn.Parameter(torch.randn(hidden, hidden, generator=g) * 0.3, requires_grad=False)
        self.lm_head = nn.Parameter(torch.randn(vocab, hidden, generator=g) * 0.3, requires_grad=False)

    def forward(self, input_ids, position_ids):
        h = self.embed_tokens[input_ids] + self.pos[position_ids]
        return torch.tanh(h @ self.proj) + h

    def get_logits(self, hidden_states):
        return hidden_states @ self.lm_head.t()

    def prepare_inputs_for_generation(self, context):
        return dict(input_ids=context.input_ids, position_ids=context.position_ids)


# ---------------------------------------------------------------- lmdeploy/pytorch/model_inputs.py (StepContext)
class StepContext:
    """Reduced: only the fields the stand-in model reads."""

    def __init__(self, input_ids, position_ids):
        self.input_ids = input_ids
        self.position_ids = position_ids

    @classmethod
    def new(cls, inputs: ModelInputs):
        q_seqlens = inputs.seq_length
        history_seqlens = inputs.history_lengths
        device = q_seqlens.device

        if inputs.is_decoding:
            attention_mask = torch.ones_like(q_seqlens)[:, None]
            position_ids = history_seqlens.unsqueeze(-1).clone()
        else:
            max_q_seqlen = q_seqlens.max().item()
            mask_range = torch.arange(max_q_seqlen, device=device)[None, :]
            attention_mask = (mask_range < q_seqlens[:, None]).long()
            position_ids = attention_mask.long().cumsum(-1) - 1
            position_ids += history_seqlens.unsqueeze(-1)

        # position ids 1d
        position_ids = cls.get_position_ids_1d(position_ids, q_seqlens)[None]
        return StepContext(input_ids=inputs.input_ids, position_ids=position_ids)

    @classmethod
    def get_position_ids_1d(cls, position_ids: torch.LongTensor, seq_length: torch.LongTensor):
        """get 1d position_ids."""
        if position_ids.size(0) == 1 or position_ids.size(1) == 1:
            position_ids_1d = position_ids.flatten()
        else:
            device = position_ids.device
            position_ids_1d = [ids[:l] for ids, l in zip(position_ids.cpu(), seq_length.cpu())]
            position_ids_1d = torch.cat(position_ids_1d).to(device)
        return position_ids_1d


# ---------------------------------------------------------------- lmdeploy/pytorch/backends/dlinfer/ascend/graph_runner.py
class AscendGraphRunner:
    """ascend graph runner."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.enable_graph = True
        if self.enable_graph:
            # real: backend='atbgraph' (dlinfer); counting backend here
            self.model = torch.compile(self.model, fullgraph=True, dynamic=True, backend=counting_backend)

    def __call__(self, **kwargs):
        return self.model(**kwargs)

    def get_logits(self, hidden_states):
        return self.model.get_logits(hidden_states)

    def prepare_inputs_for_generation(self, context=None):
        return self.model.prepare_inputs_for_generation(context)


# ---------------------------------------------------------------- lmdeploy/pytorch/engine/model_agent.py
@torch.inference_mode()
def model_forward(
    model,
    inputs: ModelInputs,
):
    """perform model forward."""
    context = StepContext.new(inputs=inputs)  # real: ctx_mgr.build_context(inputs=inputs, ...)
    input_dict = model.prepare_inputs_for_generation(context=context)
    output = model(**input_dict)
    return dict(hidden_states=output, model_metas=None)


class FusedLogitsProcessor:
    """stand-in for lmdeploy/pytorch/engine/logits_process.py (greedy)."""

    @torch.inference_mode()
    def sampling(self, logits: torch.Tensor):
        return logits.argmax(-1)


class _FakeTPGroup:
    """stand-in for the TP process group: with TP every rank holds the same logits, so what rank 0
    broadcasts is the greedy sample of this rank's logits."""

    def __init__(self, agent):
        self.agent = agent


class _FakeDist:
    @staticmethod
    def broadcast(tensor, src, group):
        # stand-in for the NCCL/HCCL broadcast (a c10d op that writes into `tensor` in place)
        with torch.inference_mode():
            tensor.copy_(FusedLogitsProcessor().sampling(group.agent._last_logits))


dist = _FakeDist()


class _DistCtx:
    rank = 0
    tp = 1
    dp = 1


class BaseModelAgent:

    def __init__(self, model):
        self.patched_model = AscendGraphRunner(model)
        self.dist_ctx = _DistCtx()
        self.dist_ctx.tp_gpu_group = _FakeTPGroup(self)
        self._out_que = None
        self.checksum = 0.0  # harness only

    def _forward_impl(self, inputs: ModelInputs):
        output = model_forward(
            self.patched_model,
            inputs,
        )
        return output

    async def async_forward(self, inputs: ModelInputs):
        output = self._forward_impl(inputs)
        await asyncio.sleep(0)
        return output

    def get_logits(self, hidden_states: torch.Tensor):
        """get logits of model output."""
        return self.patched_model.get_logits(hidden_states)

    async def _async_model_forward(self, inputs: ModelInputs, return_logits: bool = False):
        """model forward (non long-context path)."""
        ret = await self.async_forward(inputs)
        if not return_logits and not inputs.is_decoding:
            last_token_loc = inputs.seq_length.cumsum(0) - 1
            ret['hidden_states'] = ret['hidden_states'][:, last_token_loc]
        hidden_states = ret.pop('hidden_states')
        logits = self.get_logits(hidden_states)
        ret['logits'] = logits
        return ret

    async def async_sampling_logits(self, logits: torch.Tensor, inputs: ModelInputs):
        """sampling logits."""
        logits_processor = FusedLogitsProcessor()
        next_token_ids = logits_processor.sampling(logits)
        return next_token_ids

    async def _async_step_background(
        self,
        inputs: ModelInputs,
        loop_count: int,
        num_ignore_eos: torch.LongTensor = None,
        return_logits: bool = False,
        is_dummy: bool = False,
    ):
        """asyc forward task."""

        def __update_inputs(next_token_ids):
            """update inputs."""
            inputs.update(next_token_ids)

        dist_ctx = self.dist_ctx
        rank = dist_ctx.rank
        tp = dist_ctx.tp
        dp = dist_ctx.dp

        is_decoding = inputs.is_decoding
        inputs = inputs.to_device('cpu')  # real: _try_to_cuda(inputs) -> inputs.to_device('cuda')

        need_output = dp > 1 or rank % tp == 0

        for idx in range(loop_count):
            # inference
            output = await self._async_model_forward(inputs, return_logits=return_logits)
            logits = output['logits']
            logits = logits[0]  # [bs, seq, prob] -> [seq, prob]
            self._last_logits = logits  # harness only (feeds the broadcast stand-in)
            self.checksum += float(logits.sum())  # harness only

            if is_dummy:
                continue

            need_broadcast_next = (dp == 1 and tp > 1 and idx < loop_count - 1)
            if need_output:
                next_token_ids = await self.async_sampling_logits(logits, inputs)
                num_ignore_eos = num_ignore_eos - 1
                stopped = None
            else:
                next_token_ids = torch.empty_like(num_ignore_eos)
                stopped = None

            if need_broadcast_next:
                tp_gpu_group = dist_ctx.tp_gpu_group
                dist.broadcast(next_token_ids, src=rank // tp * tp, group=tp_gpu_group)

            # update for next loop
            if is_decoding and idx < loop_count - 1:
                __update_inputs(next_token_ids)
                self.checksum += float(next_token_ids.sum())  # harness only

    @torch.inference_mode()
    async def _async_loop_background(self, in_que: list):
        """async loop background."""
        for forward_inputs in in_que:
            await self._async_step_background(**forward_inputs, )


# ---------------------------------------------------------------- lmdeploy/pytorch/engine/engine.py (trimmed)
class SchedulerSequence:
    """stand-in for lmdeploy/pytorch/messages.py SchedulerSequence (the fields create_model_inputs reads)."""

    def __init__(self, token_ids, history_len, min_new_tokens=0, num_new_tokens=0):
        self.token_ids = token_ids
        self.history_len = history_len
        self.min_new_tokens = min_new_tokens
        self.num_new_tokens = num_new_tokens


class Engine:

    def __init__(self, model_agent):
        self.model_agent = model_agent

    @torch.inference_mode()
    def create_model_inputs(self, messages, is_prefill: bool):
        """create model inputs from messages.

        Args:
            messages (SeqList): The input messages.
        """
        history_lengths = [msg.history_len for msg in messages]
        history_lengths = torch.tensor(history_lengths)

        token_ids = [msg.token_ids for msg in messages]

        if isinstance(token_ids[0], int):
            token_ids = [token_ids]

        batch_size = len(messages)
        input_ids = torch.tensor([t for tokens in token_ids for t in tokens])  # real: torch.from_numpy(np.concatenate(token_ids))

        is_decoding = not is_prefill
        if not is_decoding:
            seq_length = [len(tokens) for tokens in token_ids]
            seq_length = torch.tensor(seq_length, dtype=torch.long)
        else:
            seq_length = torch.ones(batch_size, dtype=torch.long)

        # add batch dim [bs=1, seq_len]
        if input_ids.ndim == 1:
            input_ids = input_ids.unsqueeze(0)

        return ModelInputs(input_ids=input_ids, seq_length=seq_length, history_lengths=history_lengths,
                           is_decoding=is_decoding)

    def _make_forward_inputs(self, running, prefill: bool, loop_count: int):
        """make forward inputs."""

        def __get_num_ignore_eos(seqs):
            """get num ignore eos."""
            ret = [seq.min_new_tokens - seq.num_new_tokens for seq in seqs]
            return torch.tensor(ret)

        # create inputs
        inputs = self.create_model_inputs(running, prefill)
        num_ignore_eos = __get_num_ignore_eos(running)
        return dict(inputs=inputs, loop_count=loop_count, num_ignore_eos=num_ignore_eos)

    @torch.inference_mode()
    async def _async_loop_main(self, schedule):
        """Main loop of the engine (scheduler and executor queues reduced to a list)."""
        for running, prefill, loop_count in schedule:
            forward_inputs = self._make_forward_inputs(running, prefill, loop_count)
            # real: await self.executor.forward_async(forward_inputs) -> the agent's input queue, consumed by
            # its own `@torch.inference_mode() async def _async_loop_background`
            await self.model_agent._async_loop_background([forward_inputs])


def main():
    torch.manual_seed(0)
    agent = BaseModelAgent(ToyForCausalLM())
    engine = Engine(agent)
    schedule = []
    # prefill two sequences (5 + 7 tokens)
    schedule.append(([SchedulerSequence(list(range(3, 8)), 0), SchedulerSequence(list(range(8, 15)), 0)], True, 1))
    # three decode steps of 4 tokens each (loop_count = 4: the sampled tokens are fed back)
    hist = [5, 7]
    for tok in ([11, 40], [7, 21], [33, 2]):
        schedule.append(([SchedulerSequence([tok[0]], hist[0]), SchedulerSequence([tok[1]], hist[1])], False, 4))
        hist = [h + 4 for h in hist]
    asyncio.run(engine._async_loop_main(schedule))
    return agent.checksum


checksum = main()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
