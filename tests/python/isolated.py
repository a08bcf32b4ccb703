"""tests/python/isolated.py: run a snippet in a fresh interpreter, for tests that depend on what gemmkit reads once
per process (the toolchain, the cache folder)."""
import os
import subprocess
import sys
import textwrap


def run_isolated(code, timeout=120, **env):
    """The snippet's stdout; fails the test when the interpreter exits non-zero."""
    environment = dict(os.environ, **env)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout
