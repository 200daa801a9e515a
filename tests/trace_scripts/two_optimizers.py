"""Two SGD optimizers stepped in one compiled function, their lr set through a
helper every step. torch names only the first failing guard: the second
optimizer shares `step`'s code object, so the reasons read object identity
`self`, and the lr guard behind them is not shown."""
import torch


def set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr


torch.manual_seed(0)
encoder = torch.nn.Linear(4, 4)
decoder = torch.nn.Linear(4, 1)
enc_opt = torch.optim.SGD(encoder.parameters(), lr=0.01)
dec_opt = torch.optim.SGD(decoder.parameters(), lr=0.01)


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
@torch.compile(backend="eager")
def opt_step():
    enc_opt.step()
    dec_opt.step()


x = torch.randn(16, 4)
y = torch.randn(16, 1)
for step in range(6):
    lr = 0.01 / (1 + step)
    set_lr(enc_opt, lr)
    set_lr(dec_opt, lr)
    loss = torch.nn.functional.mse_loss(decoder(encoder(x)), y)
    loss.backward()
    opt_step()
    enc_opt.zero_grad()
    dec_opt.zero_grad()
print("result:", round(loss.item(), 4))
