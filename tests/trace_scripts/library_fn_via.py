"""A library function compiled in the user's file and called from a user
function (unsloth's `torch.compile(flex_attention, dynamic=False)` called in
`flex_shared_prefix_attention`): torch.nn.functional.softmax under
dynamic=False, called by `last_prob` with growing inputs. The recompiling code
object is torch's, its nearest user frame `last_prob`'s call; the compile
call that caused it is the user's."""
import torch
import torch.nn.functional as F

# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
softmax = torch.compile(F.softmax, backend="eager", dynamic=False)


def last_prob(n):
    return float(softmax(torch.arange(n, dtype=torch.float32), dim=-1)[-1])


total = 0.0
for n in range(2, 8):
    total += last_prob(n)
print("result:", round(total, 4))
