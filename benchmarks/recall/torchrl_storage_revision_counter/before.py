# Reproduction of pytorch/rl BEFORE 109783ec8 ("[BugFix] Keep replay storage bookkeeping compilable",
# PR #4094): with `compilable=True` a Storage keeps its bookkeeping as plain Python ints
# (`_mutation_revision_value`, `_last_cursor_index_value`), and `TensorStorage.set` rewrites both on
# every write (`_bump_mutation_revision`, `_set_last_cursor`). When `storage.set(...)` is called from
# compiled code (test/rb/test_storages.py::test__rand_given_ndim_recompile: a compiled
# `extend_and_sample`), Dynamo guards the ints it read and the next write fails the guard.
# Code: torchrl/data/replay_buffers/storages.py (Storage, TensorStorage, LazyTensorStorage; trimmed
# to the compilable, pytree/plain-tensor, ndim=1 path), samplers.py (RandomSampler.sample);
# mp.Value branches (compilable=False) and tensordict paths dropped.
import multiprocessing as mp
from typing import Any

import torch
from torch.compiler import disable as compile_disable, is_compiling
from torch.utils._pytree import tree_map

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


def _is_int(index):
    return isinstance(index, int) or (isinstance(index, torch.Tensor) and index.ndim == 0)


class Storage:
    ndim = 1
    max_size: int
    _rng: torch.Generator | None = None

    def __init__(self, max_size: int, checkpointer=None, compilable: bool = False) -> None:
        self.max_size = int(max_size)
        self._compilable = compilable
        self._attached_entities_list = []
        self._mutation_revision_value = 0 if compilable else mp.Value("q", 0)
        self._last_cursor_index_value = -1 if compilable else mp.Value("q", -1)

    @property
    def _mutation_revision(self) -> int:
        """Monotonic storage-content revision shared with spawned processes."""
        revision = getattr(self, "_mutation_revision_value", None)
        if not self._compilable:
            if revision is None:
                revision = self._mutation_revision_value = mp.Value("q", 0)
            return revision.value
        if revision is None:
            revision = self._mutation_revision_value = 0
        return revision

    def _bump_mutation_revision(self) -> None:
        """Invalidates process-local metadata derived from storage contents."""
        revision = getattr(self, "_mutation_revision_value", None)
        if not self._compilable:
            if revision is None:
                revision = self._mutation_revision_value = mp.Value("q", 0)
            with revision.get_lock():
                revision.value += 1
        else:
            self._mutation_revision_value = self._mutation_revision + 1

    @property
    def _last_cursor_index(self) -> int | None:
        """Last written time coordinate, shared with spawned processes."""
        cursor = getattr(self, "_last_cursor_index_value", None)
        if cursor is None:
            return None
        cursor = cursor if self._compilable else cursor.value
        return None if cursor < 0 else cursor

    def _set_last_cursor(self, cursor: Any) -> None:
        self._last_cursor = cursor
        if isinstance(cursor, torch.Tensor):
            cursor = cursor.reshape(-1)
            cursor = int(cursor[-1].item()) if cursor.numel() else -1
        elif isinstance(cursor, range):
            cursor = int(cursor[-1]) if len(cursor) else -1
        elif isinstance(cursor, (tuple, list)):
            time_cursor = cursor[0]
            if isinstance(time_cursor, torch.Tensor):
                time_cursor = time_cursor.reshape(-1)
                cursor = int(time_cursor[-1].item()) if time_cursor.numel() else -1
            else:
                cursor = int(time_cursor)
        elif cursor is None:
            cursor = -1
        else:
            cursor = int(cursor)
        shared_cursor = self._last_cursor_index_value
        if self._compilable:
            self._last_cursor_index_value = cursor
        else:
            with shared_cursor.get_lock():
                shared_cursor.value = cursor

    # TODO: Without this disable, compiler recompiles due to changing len(self) guards.
    @compile_disable()
    def _rand_given_ndim(self, batch_size):
        # a method to return random indices given the storage ndim
        if self.ndim == 1:
            return torch.randint(0, len(self), (batch_size,), generator=self._rng,
                                 device=getattr(self, "device", None))
        raise RuntimeError("Random number generation is not implemented for ndim > 1.")


class TensorStorage(Storage):
    def __init__(self, storage, max_size=None, *, device="cpu", ndim=1, compilable=False):
        super().__init__(max_size, compilable=compilable)
        self.initialized = storage is not None
        self.device = device
        self._len = 0
        self._storage = storage

    @property
    def _len(self):
        _len_value = getattr(self, "_len_value", None)
        if not self._compilable:
            if _len_value is None:
                _len_value = self._len_value = mp.Value("i", 0)
            return _len_value.value
        else:
            if _len_value is None:
                _len_value = self._len_value = 0
            return _len_value

    @_len.setter
    def _len(self, value):
        if not is_compiling() and not self._compilable:
            _len_value = getattr(self, "_len_value", None)
            if _len_value is None:
                _len_value = self._len_value = mp.Value("i", 0)
            _len_value.value = value
        else:
            self._len_value = value

    def _set_tree_map(self, cursor, data, storage):
        def set_tensor(datum, store):
            store[cursor] = datum

        tree_map(set_tensor, data, storage)

    def _get_new_len(self, data, cursor):
        int_cursor = _is_int(cursor)
        ndim = self.ndim - int_cursor
        numel = data.shape[:ndim].numel()
        self._len = min(self._len + numel, self.max_size)

    def set(self, cursor, data, *, set_cursor: bool = True):
        if set_cursor:
            self._set_last_cursor(cursor)
        if set_cursor:
            self._get_new_len(data, cursor)
        if not self.initialized:
            if not isinstance(cursor, int):
                self._init(tree_map(lambda x: x[0], data))
            else:
                self._init(data)
        self._set_tree_map(cursor, data, self._storage)
        self._bump_mutation_revision()

    def get(self, index):
        return tree_map(lambda x: x[index], self._storage)

    # TODO: Without this disable, compiler recompiles due to changing _len_value guards.
    @compile_disable()
    def __len__(self):
        return self._len


class LazyTensorStorage(TensorStorage):
    def __init__(self, max_size, *, device="cpu", ndim=1, compilable=False):
        super().__init__(storage=None, max_size=max_size, device=device, ndim=ndim, compilable=compilable)

    def _init(self, data) -> None:
        self._storage = tree_map(
            lambda x: torch.empty((self.max_size, *x.shape), dtype=x.dtype, device=self.device), data
        )
        self.initialized = True


class RandomSampler:
    def sample(self, storage: Storage, batch_size: int):
        if len(storage) == 0:
            raise RuntimeError("Cannot sample from an empty storage.")
        index = storage._rand_given_ndim(batch_size)
        return index, {}


# test/rb/test_storages.py::TestStorages::test__rand_given_ndim_recompile (sizes kept)
torch.manual_seed(0)
num_extend = 5
data_size = 50
storage_size = (num_extend + 1) * data_size
sample_size = 3

storage = LazyTensorStorage(storage_size, compilable=True)
sampler = RandomSampler()


@torch.compile(backend=counting_backend)
def extend_and_sample(data):
    storage.set(torch.arange(data_size) + len(storage), data)
    return sampler.sample(storage, sample_size)


data = torch.randint(100, (data_size, 1))
checksum = 0.0
for i in range(num_extend):
    index, _ = extend_and_sample(data + i)
    checksum += storage.get(index).float().sum().item()
assert len(storage) == num_extend * data_size
checksum += storage.get(slice(0, len(storage))).float().sum().item() + int(storage._mutation_revision)
checksum += int(storage._last_cursor_index)
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
