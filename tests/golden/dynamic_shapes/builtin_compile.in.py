import torch

code = compile("x * 2", "<expr>", "eval", dont_inherit=False)
for n in range(1, 5):
    x = torch.ones(n)
    print(n, float(eval(code).sum()))
