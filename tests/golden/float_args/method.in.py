# golden: runtime
import torch


class Smoother:
    @torch.compile(dynamic=False)
    def smooth(self, x, eps):
        return (x * (1 - eps) + eps / 4).sum()

    def run(self):
        x = torch.linspace(0, 1, 4)
        for i in range(5):
            print(i, round(float(self.smooth(x, 0.05 * i)), 5))


Smoother().run()
