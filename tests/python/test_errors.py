"""tests/python/test_errors.py (unit): the C++ errors arrive as Python exceptions of the right classes with the
C++ messages, and CompileError / ToolchainError carry what the C++ gives (a fake nvcc; no real compile)."""
import numpy as np
import pytest

import gemmkit
from gpu_specs import fp16_plan
from isolated import run_isolated


def test_hierarchy():
    for cls, builtin in [(gemmkit.ConfigError, ValueError), (gemmkit.TensorError, ValueError),
                         (gemmkit.ToolchainError, RuntimeError), (gemmkit.CompileError, RuntimeError),
                         (gemmkit.CudaError, RuntimeError)]:
        assert issubclass(cls, gemmkit.Error) and issubclass(cls, builtin), cls
        assert cls.__module__ == "gemmkit"
    assert not issubclass(gemmkit.ConfigError, RuntimeError)
    assert not issubclass(gemmkit.CudaError, ValueError)


def test_config_errors_carry_the_cxx_messages():
    with pytest.raises(gemmkit.ConfigError) as e:
        gemmkit.Gemm(element_A=np.float16, layout="row", cc=80)
    assert str(e.value) == "Must specify one of element_B, tensor B, or generic element."
    with pytest.raises(gemmkit.ConfigError) as e:
        gemmkit.Gemm(element=np.float16, cc=80)
    assert str(e.value) == "Must specify one of layout_A, tensor A, or generic layout."
    with pytest.raises(ValueError) as e:  # a reference user's `except ValueError` still catches it
        gemmkit.Gemm(A=np.zeros((8, 8), np.float16), element_A=np.float16, layout="row", element="f16", cc=80)
    assert str(e.value) == "Must not specify both element_A and tensor A."
    plan = gemmkit.Gemm(element=np.int8, element_C=np.int32, element_D=np.int32, element_accumulator=np.int32,
                        layout="row", cc=80)
    with pytest.raises(gemmkit.ConfigError) as e:
        plan.opclass = "tensor_op"
    assert str(e.value) == ("Unsupported operation class TensorOp for CC 80 and data type combination (s8, s8, s32) "
                            "and layout combination (RowMajor, RowMajor).")
    with pytest.raises(gemmkit.ConfigError, match="80 \\(Ampere\\) and newer"):
        fp16_plan(75)


def test_no_kernel_names_the_nearest_combination_that_has_one():
    # The accumulator defaults to C's type, bf16, which no kernel accumulates in; the C++ error says what to set.
    with pytest.raises(gemmkit.ConfigError) as e:
        gemmkit.Gemm(element="bf16", layout="col", cc=80)
    assert "The nearest combination with a kernel sets element_accumulator=f32." in str(e.value)
    plan = gemmkit.Gemm(element="bf16", layout="col", element_accumulator="f32", cc=80)
    assert plan.element_accumulator == gemmkit.DataType.f32


def test_python_side_conversion_errors():
    with pytest.raises(gemmkit.ConfigError, match="No available conversion from type"):
        gemmkit.Gemm(element=np.complex64, layout="row", cc=80)
    with pytest.raises(gemmkit.ConfigError, match="Invalid layout 'diagonal'"):
        gemmkit.Gemm(element=np.float16, layout="diagonal", cc=80)
    with pytest.raises(gemmkit.ConfigError, match="Invalid opcode class"):
        fp16_plan(80).opclass = "wmma"


@pytest.mark.skipif(gemmkit.cuda_device_count() > 0, reason="needs a machine without a CUDA device")
def test_no_gpu_is_a_cuda_error():
    with pytest.raises(gemmkit.CudaError) as e:
        gemmkit.Gemm(element=np.float16, layout="row")  # no cc: asks the current device
    assert "No CUDA device is available" in str(e.value)
    assert isinstance(e.value.code, int) and e.value.code != 0


def test_toolchain_error(tmp_path):
    out = run_isolated("""
        import numpy as np, gemmkit
        plan = gemmkit.Gemm(element=np.float16, layout="row", element_accumulator=np.float32, cc=80)
        try:
            plan.compile()
        except gemmkit.ToolchainError as e:
            print(isinstance(e, RuntimeError), e)
    """, CUTLASS_PATH=str(tmp_path / "nowhere"), GEMMKIT_CACHE_DIR=str(tmp_path / "cache"))
    assert out.startswith(f"True CUTLASS headers not found at {tmp_path / 'nowhere'} (from CUTLASS_PATH)")


FAKE_NVCC = """#!/bin/sh
case "$*" in *--version*) echo "Cuda compilation tools, release 13.0, V13.0.48"; echo "Build cuda_13.0.fake"; exit 0;; esac
echo "fake nvcc: error: this is not a compiler" >&2
exit 3
"""


def test_compile_error_carries_log_and_source(tmp_path):
    bin_dir = tmp_path / "cuda" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvcc").write_text(FAKE_NVCC)
    (bin_dir / "nvcc").chmod(0o755)
    out = run_isolated("""
        import os, numpy as np, gemmkit
        plan = gemmkit.Gemm(element=np.float16, layout="row", element_accumulator=np.float32, cc=80)
        try:
            plan.compile()
            print("compiled?!")
        except gemmkit.ToolchainError as e:
            print("toolchain:", e)
        except gemmkit.CompileError as e:
            print("compile", e.exit_code, os.path.isfile(e.source_path), "not a compiler" in e.log,
                  any(a.endswith("nvcc") for a in e.argv), isinstance(e, RuntimeError))
    """, CUDA_HOME=str(tmp_path / "cuda"), GEMMKIT_CACHE_DIR=str(tmp_path / "cache"))
    if out.startswith("toolchain:"):
        pytest.skip(f"no CUTLASS headers here ({out.strip()})")
    assert out.strip() == "compile 3 True True True True"
