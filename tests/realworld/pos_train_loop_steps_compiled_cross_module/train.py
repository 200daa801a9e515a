import torch


def make_train_step(model, optimizer):
    def train_step(batch):
        optimizer.zero_grad()
        loss = model(batch).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    return train_step


def train(model, optimizer, scheduler, batches):
    step_fn = torch.compile(make_train_step(model, optimizer))
    for batch in batches:
        scheduler.step()
        step_fn(batch)
