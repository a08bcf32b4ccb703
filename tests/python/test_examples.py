"""tests/python/test_examples.py: the Python walk-throughs (examples/python) plan and compile without a GPU when
given --cc, and say clearly where running needs one. Unit tier: the command line itself; compile tier: basic_gemm.py
--cc 90 through nvcc (the default SM90 kernel, from the per-user cache when it is there)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

import gemmkit


def example(root, name, *arguments, timeout=60):
    return subprocess.run([sys.executable, str(root / "examples" / "python" / name), *arguments],
                          capture_output=True, text=True, timeout=timeout, cwd=root)


@pytest.mark.parametrize("name", ["basic_gemm.py", "epilogue.py", "grouped_gemm.py", "fp8.py"])
def test_examples_take_cc_and_torch(root, name):
    result = example(root, name, "--help")
    assert result.returncode == 0, result.stderr
    assert "--cc CC" in result.stdout and "--torch" in result.stdout


@pytest.mark.skipif(gemmkit.cuda_device_count() > 0, reason="a GPU is visible: the examples plan for it")
def test_without_a_gpu_or_cc_an_example_says_to_pass_cc(root):
    result = example(root, "basic_gemm.py")
    assert result.returncode == 1
    assert "No CUDA device is visible; pass --cc 90" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.compile
def test_basic_gemm_plans_and_compiles_for_sm90_and_stops_where_a_gpu_is_needed(root):
    result = example(root, "basic_gemm.py", "--cc", "90", timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == ("1. Plan for SM90: opclass OpcodeClass.TensorOp, kernel "
                        "cutlass3x_sm90_tensorop_s0x0x0gemm_f16_f16_f32_f16_f16_256x256x64_2x1x1_0_ttt_align8")
    assert re.fullmatch(r"   compiled: (cache hit|built in \d+\.\d s), /.+/kernel\.so", lines[1]), lines[1]
    if gemmkit.cuda_device_count() > 0:
        assert lines[-1] == "all exact"
    else:
        assert lines[2] == ("Run: skipped. Running needs a CUDA device and none is visible on this machine; planning "
                            "and compiling for SM90 worked.")
        assert len(lines) == 3


def cpp_example(name, *arguments, timeout=60):
    """Runs build/example_<name> (beside the gemmkit command ctest names in GEMMKIT_CLI)."""
    binary = pathlib.Path(os.environ.get("GEMMKIT_CLI", "build/gemmkit")).resolve().parent / f"example_{name}"
    if not binary.exists():
        if "GEMMKIT_CLI" not in os.environ:  # pytest on its own (the GPU machine's Python tier): no C++ build here
            pytest.skip(f"{binary} is missing: the C++ examples are tested under ctest, which sets GEMMKIT_CLI")
        pytest.fail(f"{binary} is missing: build the project (scripts/setup.sh) first")
    return subprocess.run([str(binary), *arguments], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", ["basic_gemm", "epilogue", "grouped_gemm"])
@pytest.mark.parametrize("arguments", [["--cc"], ["--cc", "ninety"], ["--cc", "0"], ["--frob"]])
def test_cpp_examples_refuse_a_bad_command_line(name, arguments):
    result = cpp_example(name, *arguments)
    assert result.returncode == 2
    assert "usage:" in result.stderr and "[--cc N]" in result.stderr


@pytest.mark.compile
@pytest.mark.skipif(gemmkit.cuda_device_count() > 0, reason="a GPU is visible: the example runs the whole walk-through")
def test_cpp_basic_gemm_plans_and_compiles_for_sm90_and_stops_where_a_gpu_is_needed():
    result = cpp_example("basic_gemm", "--cc", "90", timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("1. Plan: Gemm(element=f16, layout=RowMajor, element_accumulator=f32) for SM90\n")
    assert re.search(r"\n2\. Compile: (cache hit|compiled in \d+\.\d s)\n", result.stdout), result.stdout
    assert "3. Run: skipped. Running needs a CUDA device and none is visible" in result.stdout
