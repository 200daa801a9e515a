# golden: runtime
# The counter is advanced through the compiled wrapper: the change reaches
# the module's attribute (measured on 2.13: 8 recompiles, then eager), so it
# counts like a change on the module's own variable.
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.step_count = 0

    def forward(self, x):
        return x * (self.step_count + 1)


def main():
    model = Model()
    if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):
        torch._dynamo.config.allow_unspec_int_on_nn_module = True
    compiled = torch.compile(model)
    x = torch.ones(2)
    for _ in range(12):
        print(compiled(x).sum().item())
        compiled.step_count += 1


if __name__ == "__main__":
    main()
