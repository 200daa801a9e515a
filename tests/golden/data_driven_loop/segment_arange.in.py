# Reported, no fix (FR015): fla's prepare_position_ids before #909, one
# torch.arange per packed segment in a comprehension over
# `torch.diff(cu_seqlens).unbind()`, compiled with dynamic=True. torch
# unrolls the loop and guards the number of segments: every new count is a
# new graph. Measured (torch 2.13 CPU): 9 graphs (the loop also breaks the
# graph) over 4 batches of 3, 5, 2 and 3 segments.
import torch


def prepare_position_ids(cu_seqlens):
    return torch.cat([torch.arange(n) for n in torch.diff(cu_seqlens).unbind()])


compiled = torch.compile(prepare_position_ids, dynamic=True)
total = 0
for lens in ([5, 7, 8], [1, 2, 3, 4, 5], [6, 6], [2, 2, 2]):
    cu = torch.cat([torch.zeros(1, dtype=torch.long), torch.tensor(lens).cumsum(0)])
    total += int(compiled(cu).sum())
print(total)
