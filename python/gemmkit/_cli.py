"""The `gemmkit` console script: runs the command-line program the package ships (gemmkit/bin/gemmkit), the same
binary as the C++ build's `gemmkit`, with this process's arguments and environment."""
import os
import sys


def main() -> None:
    from . import _gemmkit  # where the package's binaries are, also under `pip install -e .`

    exe = os.path.join(os.path.dirname(os.path.abspath(_gemmkit.__file__)), "bin", "gemmkit")
    if not os.access(exe, os.X_OK):
        sys.exit(f"gemmkit: the command-line program is missing from the package ({exe}); reinstall gemmkit")
    os.execv(exe, ["gemmkit", *sys.argv[1:]])
