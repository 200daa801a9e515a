# golden: runtime
# open_clip's scheduler helper (before 0b07760) is already tensor-aware: it
# fills a tensor lr and writes a float one.  Only the constructor changes; the
# float branch is never reached once the lr is a tensor and stays as it is.
import math

import torch


def assign_learning_rate(optimizer, new_lr):
    for param_group in optimizer.param_groups:
        lr = param_group["lr"]
        if isinstance(lr, torch.Tensor):
            lr.fill_(new_lr)
        else:
            param_group["lr"] = new_lr


def cosine_lr(optimizer, base_lr, warmup_length, steps):
    def _lr_adjuster(step):
        if step < warmup_length:
            lr = base_lr * (step + 1) / warmup_length
        else:
            e, es = step - warmup_length, steps - warmup_length
            lr = 0.5 * (1 + math.cos(math.pi * e / es)) * base_lr
        assign_learning_rate(optimizer, lr)
        return lr

    return _lr_adjuster


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-6)
scheduler = cosine_lr(optimizer, 1e-3, 3, 12)
batches = [torch.randn(32, 8) for _ in range(12)]


def train_step(batch):
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss


compiled_train_step = torch.compile(train_step)
for step in range(12):
    scheduler(step)
    optimizer.zero_grad()
    loss = compiled_train_step(batches[step])
print("final loss", round(loss.item(), 6))
