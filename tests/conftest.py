import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
# the CLI caches results in .fix_recompiles_cache/ of the folder it runs in;
# tests compare folder contents and patch the engine, so they run without it
# (tests/test_scale.py turns it back on where it tests the cache)
os.environ.setdefault("FIX_RECOMPILES_NO_CACHE", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "runtime: runs real torch in a subprocess (slow)")
