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
    # one folder per session where the runtime proofs' results are shared
    # between xdist workers (tests/golden.py `probe`); the workers inherit it
    if not hasattr(config, "workerinput"):
        import tempfile

        config._probe_cache = tempfile.mkdtemp(prefix="fix-recompiles-probes-")
        os.environ["FIX_RECOMPILES_PROBE_CACHE"] = config._probe_cache
        # the replay key (codemods/pipeline/replay.py) of this session's runs,
        # not the user's: nothing is written to their home
        config._xdg_cache = tempfile.mkdtemp(prefix="fix-recompiles-xdg-")
        os.environ["XDG_CACHE_HOME"] = config._xdg_cache


def pytest_unconfigure(config):
    # this process's warm servers (tests/warm_python.py), if it started any
    warm = sys.modules.get("warm_python")
    if warm is not None:
        warm.close_all()
    xdg = getattr(config, "_xdg_cache", None)
    if xdg:
        import shutil

        shutil.rmtree(xdg, ignore_errors=True)
    folder = getattr(config, "_probe_cache", None)
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get("FIX_RECOMPILES_PROBE_CACHE") == folder:
            del os.environ["FIX_RECOMPILES_PROBE_CACHE"]
