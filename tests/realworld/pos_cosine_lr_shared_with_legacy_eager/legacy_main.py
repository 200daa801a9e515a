# open_clip's `legacy_main.py` (trimmed): the same schedule for an optimizer
# stepped eagerly, its lr a float.
import torch

from scheduler import cosine_lr


def legacy_main(batches):
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    scheduler = cosine_lr(optimizer, 5e-4, 3, len(batches))
    for step, batch in enumerate(batches):
        scheduler(step)
        optimizer.zero_grad()
        model(batch).pow(2).mean().backward()
        optimizer.step()
    return sum(p.sum().item() for p in model.parameters())
