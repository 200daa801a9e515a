# golden: runtime
# A run that resumes from a checkpoint (nanoGPT's train.py: `init_from ==
# 'resume'` -> `optimizer.load_state_dict(checkpoint['optimizer'])`), its
# step compiled and its lr written every iteration. torch's load_state_dict
# puts the saved lr back: a float, in a checkpoint written before the fix,
# so a plain `.fill_` would crash on resume; the write becomes tensor-aware.
import os

import torch

torch.manual_seed(0)
out_dir = os.environ.get("OUT_DIR", "")
ckpt_path = os.path.join(out_dir, "ckpt.pt")
init_from = "resume" if out_dir and os.path.exists(ckpt_path) else "scratch"

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
iter_num = 0
if init_from == "resume":
    checkpoint = torch.load(ckpt_path)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    iter_num = checkpoint["iter_num"]


@torch.compile(backend="eager")
def optimizer_step():
    optimizer.step()


def get_lr(it):
    return 6e-4 * min(1.0, (it + 1) / 5)


x = torch.randn(16, 4)
y = torch.randn(16, 1)
for it in range(iter_num, iter_num + 8):
    lr = get_lr(it)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer_step()
    optimizer.zero_grad(set_to_none=True)
print("final loss", round(loss.item(), 5))
if out_dir:
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": it + 1}, ckpt_path)
