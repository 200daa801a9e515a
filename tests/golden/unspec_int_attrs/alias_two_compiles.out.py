# golden: runtime
import torch as th


class Base(th.nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = 0

    def forward(self, x):
        self.seen += 2
        return x.sin() + self.seen


class Child(Base):
    pass


if hasattr(th._dynamo.config, "allow_unspec_int_on_nn_module"):
    th._dynamo.config.allow_unspec_int_on_nn_module = True
first = th.compile(Child())
second = th.compile(Child())
x = th.ones(3)
for _ in range(6):
    print(round(float(first(x).sum()), 4), round(float(second(x).sum()), 4))
