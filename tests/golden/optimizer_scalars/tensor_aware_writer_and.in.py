# golden: runtime
# A tensor-aware helper whose test has a second condition: `not
# isinstance(...) and ...` keeps a tensor lr out of its first branch.  It
# serves the compiled step's optimizer, which gets a tensor lr, and an eager
# one that keeps its float lr: the float branch must stay a plain write
# (`.fill_` there fails on the float lr).
import torch


def assign_learning_rate(optimizer, new_lr):
    for param_group in optimizer.param_groups:
        if not isinstance(param_group["lr"], torch.Tensor) and new_lr is not None:
            param_group["lr"] = new_lr
        elif new_lr is not None:
            param_group["lr"].fill_(new_lr)


torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
head = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
head_optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
batches = [torch.randn(16, 8) for _ in range(10)]


@torch.compile
def train_step(batch):
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss


for step in range(10):
    lr = 0.1 / (1 + step)
    assign_learning_rate(optimizer, lr)
    assign_learning_rate(head_optimizer, lr)
    optimizer.zero_grad()
    head_optimizer.zero_grad()
    loss = train_step(batches[step])
    head_loss = head(batches[step]).pow(2).mean()
    head_loss.backward()
    head_optimizer.step()
print("final loss", round(loss.item(), 6), round(head_loss.item(), 6))
