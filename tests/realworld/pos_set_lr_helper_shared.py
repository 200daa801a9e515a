# realworld: positive fix=unsafe graphs=4
# Pattern: ruotianluo/self-critical.pytorch (misc/utils.py at
# 0edc73621e337af88c35d7108ee54dbe06ec8aa0: `def set_lr(optimizer, lr)`
# writing `group['lr'] = lr`), here also called for a third optimizer that is
# stepped eagerly (issue 28: `set_lr(opt_g, lr); set_lr(opt_d, lr)`): the two
# optimizers stepped in the compiled function recompile on every lr change.
# The helper's write becomes `.fill_` only if every optimizer it reaches has a
# tensor lr, so the eager one's lr becomes a tensor too: one fix for the three
# constructors and the helper, unsafe (an eager step then reads a tensor lr).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 4
# graphs over 12 steps; fixed: 2, same output.
import torch


def set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr


torch.manual_seed(0)
encoder = torch.nn.Linear(4, 4)
decoder = torch.nn.Linear(4, 1)
critic = torch.nn.Linear(1, 1)
enc_opt = torch.optim.SGD(encoder.parameters(), lr=0.01)  # expect: FR004
dec_opt = torch.optim.SGD(decoder.parameters(), lr=0.01)  # expect: FR004
critic_opt = torch.optim.SGD(critic.parameters(), lr=0.01)


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
    set_lr(critic_opt, lr)
    out = decoder(encoder(x))
    loss = torch.nn.functional.mse_loss(out, y) + critic(out.detach()).pow(2).mean()
    loss.backward()
    opt_step()
    critic_opt.step()
    enc_opt.zero_grad()
    dec_opt.zero_grad()
    critic_opt.zero_grad()
print(round(loss.item(), 4))
