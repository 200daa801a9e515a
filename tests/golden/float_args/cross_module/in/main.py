# golden: runtime
# A function compiled in one module of a package and called from another.
from lossy.train import train

train()
