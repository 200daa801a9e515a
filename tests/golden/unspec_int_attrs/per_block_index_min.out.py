# golden: runtime --target-torch 2.13
# Blocks compiled one by one (regional compilation), each with its own index,
# which forward reads through min() with a number constant: the flag makes
# the index dynamic (measured on 2.13: 8 graphs + limit -> 2).
import torch


class Block(torch.nn.Module):
    def __init__(self, i):
        super().__init__()
        self.i = i

    def forward(self, x):
        return x * min(1.0, (self.i + 1) / 6)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(i) for i in range(12)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def main():
    m = Model()
    torch._dynamo.config.allow_unspec_int_on_nn_module = True
    for b in m.blocks:
        b.compile()
    print(round(m(torch.ones(2)).sum().item(), 6))


if __name__ == "__main__":
    main()
