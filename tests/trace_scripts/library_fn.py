"""A library function compiled in the user's file: torch.nn.functional.softmax
under dynamic=False, called with growing inputs. The recompiling code object is
torch's; the compile call that caused it is the user's."""
import torch
import torch.nn.functional as F

# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
softmax = torch.compile(F.softmax, backend="eager", dynamic=False)

total = 0.0
for n in range(2, 8):
    total += float(softmax(torch.arange(n, dtype=torch.float32), dim=-1)[-1])
print("result:", round(total, 4))
