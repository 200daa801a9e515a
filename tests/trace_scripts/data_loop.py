"""A comprehension over tensor data inside a function compiled with
dynamic=True (fla's prepare_position_ids before #909): torch unrolls it and
guards the number of segments; every new count recompiles."""
import torch


def prepare_position_ids(cu_seqlens):
    return torch.cat([torch.arange(n) for n in torch.diff(cu_seqlens).unbind()])


compiled = torch.compile(prepare_position_ids, dynamic=True, backend="eager")
total = 0
for lens in ([5, 7, 8], [1, 2, 3, 4, 5], [6, 6], [2, 2, 2]):
    cu = torch.cat([torch.zeros(1, dtype=torch.long), torch.tensor(lens).cumsum(0)])
    total += int(compiled(cu).sum())
print("result:", total)
