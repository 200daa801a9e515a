def compile(fn, dynamic=False):
    return fn


@compile(dynamic=False)
def f(x):
    return x


for n in range(10):
    f([0] * n)
