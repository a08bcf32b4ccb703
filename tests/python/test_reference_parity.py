"""tests/python/test_reference_parity.py: the reference's plan attributes its interface tests and notebooks use, on
gemmkit's plans without a GPU: math_operation, TileDescription.math_instruction, and SM90 Conv2d plans that serve
what only the CUTLASS 2.x kernels run."""
import subprocess
import sys

import numpy as np
import pytest

import gemmkit


def test_math_operation_takes_names_and_moves_sm90_plans_to_the_2x_kernels_that_offer_it():
    plan = gemmkit.Gemm(element=np.float32, layout=gemmkit.LayoutType.RowMajor, cc=90)
    assert plan.math_operation is None and plan.kernel_cc == 90
    assert gemmkit.MathOperation.multiply_add_fast_f32 in plan.math_operations()
    plan.math_operation = "multiply_add_fast_f32"
    assert plan.math_operation == gemmkit.MathOperation.multiply_add_fast_f32
    assert plan.kernel_cc == 80
    assert all(td.math_operation == gemmkit.MathOperation.multiply_add_fast_f32 for td in plan.tile_descriptions())
    plan.math_operation = None
    assert plan.kernel_cc == 90
    with pytest.raises(gemmkit.ConfigError, match="math operation"):
        plan.math_operation = "multiply_add_fast_f64"
    pinned = gemmkit.Gemm(element=np.float32, layout=gemmkit.LayoutType.RowMajor, cc=90, kernel_cc=90)
    with pytest.raises(gemmkit.ConfigError, match="kernel_cc=80"):
        pinned.math_operation = gemmkit.MathOperation.multiply_add_fast_f32


def test_the_move_to_the_2x_kernels_is_said_once_on_stderr():
    # A fresh interpreter: a note is said once per process, and another test of this process may have said it.
    script = ("import numpy as np, gemmkit\n"
              "for _ in range(2):\n"
              "    plan = gemmkit.Gemm(element=np.float32, layout='row', cc=90)\n"
              "    plan.math_operation = 'multiply_add_fast_f32'\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stderr.count("multiply_add_fast_f32") == 1, result.stderr
    assert "CUTLASS 2.x kernels only" in result.stderr and "kernel_cc 80" in result.stderr, result.stderr


@pytest.mark.parametrize("opclass", [gemmkit.OpcodeClass.TensorOp, gemmkit.OpcodeClass.Simt])
def test_every_tile_description_names_its_opcode_class(opclass):
    # The reference's test_opclass_switch reads td.math_instruction.opcode_class of every configuration.
    plan = gemmkit.Gemm(element=gemmkit.DataType.f16, layout=gemmkit.LayoutType.RowMajor, cc=90)
    plan.opclass = opclass
    instructions = [td.math_instruction for td in plan.tile_descriptions()]
    assert instructions and all(i.opcode_class == opclass for i in instructions)
    assert "opcode_class=" in repr(instructions[0])
    assert gemmkit.TileDescription(threadblock_shape=[128, 128, 32]).math_instruction is None


def test_sm90_conv_plans_serve_the_2x_only_problems_and_settings_unless_pinned():
    f32_dgrad = gemmkit.Conv2dDgrad(element=np.float32, cc=90)
    assert f32_dgrad.kernel_cc == 80
    with pytest.raises(gemmkit.ConfigError, match="kernel_cc=80"):
        gemmkit.Conv2dDgrad(element=np.float32, cc=90, kernel_cc=90)

    # 03_basic_conv2d's strided dgrad, on numpy NHWC arrays (spec_for reads no data).
    dgrad = gemmkit.Conv2dDgrad(element=np.float16, element_accumulator=np.float32, cc=90)
    grad_output, weight = np.zeros((32, 14, 14, 128), np.float16), np.zeros((128, 3, 3, 64), np.float16)
    grad_input = np.zeros((32, 28, 28, 64), np.float16)
    spec = dgrad.spec_for(grad_output, weight, None, grad_input, stride=(2, 2), padding=(1, 1))
    assert spec.family == gemmkit.KernelFamily.sm80_conv2d
    assert dgrad.kernel_cc == 90  # the plan stays on the SM90 kernels for what they run
    assert dgrad.spec_for(grad_output[:, :, :, :], weight, None, np.zeros((32, 14, 14, 64), np.float16),
                          padding=(1, 1)).family == gemmkit.KernelFamily.sm90_conv2d

    fprop = gemmkit.Conv2dFprop(element=np.float16, element_accumulator=np.float32, cc=90)
    fprop.iterator_algorithm = "analytic"
    assert fprop.kernel_cc == 80
    fprop = gemmkit.Conv2dFprop(element=np.float16, element_accumulator=np.float32, cc=90)
    fprop.swizzling_stride = 4
    assert fprop.kernel_cc == 80 and fprop.swizzling_functor == gemmkit.SwizzlingFunctor.IdentitySwizzle4
    with pytest.raises(gemmkit.ConfigError, match="1, 2, 4 or 8"):
        fprop.swizzling_stride = 3


@pytest.mark.gpu
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_odd_leading_dimensions_run_exactly_by_default(dtype_name):
    # torch runs a 777 x 1999 x 3001 GEMM with odd leading dimensions; a default plan does too (CUTLASS 2.x tensor-op
    # kernels of a two-stage mainloop that loads the operands element by element).
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, dtype_name)
    a = torch.randint(-2, 3, (777, 3001), device="cuda").to(dtype)
    b = torch.randint(-2, 3, (3001, 1999), device="cuda").to(dtype)
    d = torch.empty(777, 1999, device="cuda", dtype=dtype)
    plan = gemmkit.Gemm(element=dtype, element_accumulator=torch.float32, layout=gemmkit.LayoutType.RowMajor)
    spec = plan.spec_for(a, b, None, d, 0.0)
    assert spec.opclass == gemmkit.OpcodeClass.TensorOp and spec.kernel_cc == 80 and "_align1" in spec.name()
    plan.run(a, b, None, d)
    assert torch.equal(d, (a.double() @ b.double()).to(dtype))
