# realworld: positive fix=safe graphs=4
# Pattern: ruotianluo/self-critical.pytorch (misc/utils.py at
# 0edc73621e337af88c35d7108ee54dbe06ec8aa0: `def set_lr(optimizer, lr): for
# group in optimizer.param_groups: group['lr'] = lr`, called by train.py every
# epoch; the same helper is in many trainers): two optimizers, one lr helper
# called for both, both stepped inside one compiled function (issue 15 item 2).
# Making only the constructors' lr tensors is not enough: the helper writes a
# float back every step; its write must become `group["lr"].fill_(lr)`, and both
# optimizers are fixed together (one finding carries the edits of both).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 4
# graphs over 12 steps; fixed (both constructors and the helper): 2, same output.
import torch


def set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr


torch.manual_seed(0)
encoder = torch.nn.Linear(4, 4)
decoder = torch.nn.Linear(4, 1)
enc_opt = torch.optim.SGD(encoder.parameters(), lr=0.01)  # expect: FR004
dec_opt = torch.optim.SGD(decoder.parameters(), lr=0.01)  # expect: FR004


@torch.compile(backend="eager")
def opt_step():
    enc_opt.step()
    dec_opt.step()


x = torch.randn(16, 4)
y = torch.randn(16, 1)
for step in range(12):
    lr = 0.01 / (1 + step)
    set_lr(enc_opt, lr)
    set_lr(dec_opt, lr)
    loss = torch.nn.functional.mse_loss(decoder(encoder(x)), y)
    loss.backward()
    opt_step()
    enc_opt.zero_grad()
    dec_opt.zero_grad()
print(round(loss.item(), 4))
