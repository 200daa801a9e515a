# golden: runtime
import torch


class Stepper:
    def step(self, x):
        return (x * 0.5).sum()


obj = Stepper()
obj.step = torch.compile(obj.step)
for n in range(1, 11):
    print(n, round(float(obj.step(torch.ones(n))), 4))
