# golden: --unsafe-fixes runtime=limit_hits
import torch


def norm(x):
    return (x / (x.abs().sum() + 1)).sum()


fast_norm = torch.compile(norm, dynamic=False)


def main():
    shapes = None
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 10)
    for shape in [(1,), (2,), (3,), (4,), (5,), (6,), (7,), (8,), (9,), (10,)]:
        print(shape, round(float(fast_norm(torch.ones(shape))), 4))
    return shapes


if __name__ == "__main__":
    main()
