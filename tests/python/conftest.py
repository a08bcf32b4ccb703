"""tests/python/conftest.py: tiers for the Python package. Unit tests need neither nvcc nor a GPU; tests
marked `gpu` skip themselves (with the reason) when no CUDA device is visible; torch / cupy tests skip when the
package is missing. CI runs `pytest tests/python` without torch or cupy."""
import pathlib
import sys

import pytest

import gemmkit

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # gpu_specs, shared with the prebuild step


def pytest_collection_modifyitems(config, items):
    if gemmkit.cuda_device_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA device visible (gemmkit.cuda_device_count() == 0)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture
def root():
    return ROOT
