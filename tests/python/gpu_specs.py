"""tests/python/gpu_specs.py: every kernel the Python gpu tier and examples/python use, so that
tools/dev/python-gpu-check can compile them all in parallel before pytest runs (`python gpu_specs.py`)."""
import itertools

import numpy as np

import gemmkit
from gemmkit.epilogue import max, relu, trace


def fp16_plan(cc=None, **kwargs):
    """The walk-throughs' plan: fp16 operands, fp32 accumulation, row-major."""
    return gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32,
                        cc=cc, **kwargs)


def specs(cc=None):
    out = [fp16_plan(cc).construct()]
    simt = fp16_plan(cc)
    simt.opclass = "simt"
    out.append(simt.construct())
    tiled = fp16_plan(cc)
    out.append(tiled.construct(tiled.tile_descriptions()[1]))
    tiled.swizzling_functor = gemmkit.swizzle.ThreadblockSwizzleStreamK
    out.append(tiled.construct())
    for activation in gemmkit.Gemm.activations():
        plan = fp16_plan(cc)
        plan.activation = activation
        out.append(plan.construct())
    transposed_b = gemmkit.Gemm(element=np.float16, layout_A="row", layout_B="col", layout_C="row",
                                element_accumulator=np.float32, cc=cc)
    out.append(transposed_b.construct())
    for kernel_cc in (None, 80):  # the grouped walk-through's kernels, on each family
        grouped = gemmkit.GroupedGemm(element=np.float16, layout="row", element_accumulator=np.float32, cc=cc,
                                      kernel_cc=kernel_cc)
        out.append(grouped.construct())
    moe = gemmkit.GroupedGemm(element="bf16", layout="row", layout_B="col", element_accumulator=np.float32, cc=cc)
    out.append(moe.construct())
    out += torch_specs(cc)
    out += list(evt_export_specs(cc).values())
    out += bias_act_specs(cc)
    out += fp8_specs(cc)
    out += conv_specs(cc)
    unique = {}
    for spec in out:
        unique.setdefault(spec.canonical(), spec)
    return list(unique.values())


def torch_specs(cc=None):
    """What the torch tier adds (test_torch_*.py, examples/python/tensor_parallel.py): gemmkit.torch.gemm's plans
    for transposed operands (autograd's dB = A^T dD), an MLP's fused GELU, the tensor-parallel example's f32, and
    the grouped plans of grouped_gemm and the grouped export."""
    out = []
    for element, layout_A, layout_B, activation in [(np.float16, "col", "row", "identity"),
                                                    (np.float16, "col", "col", "identity"),
                                                    (np.float16, "row", "col", "gelu"),
                                                    (np.float32, "row", "col", "relu"),
                                                    (np.float32, "row", "col", "identity")]:
        plan = gemmkit.Gemm(element=element, layout_A=layout_A, layout_B=layout_B, layout_C="row",
                            element_accumulator=np.float32, cc=cc)
        plan.activation = activation
        out.append(plan.construct())
    # gemmkit.torch.grouped_gemm's plans (test_torch_ops_grouped.GROUPED_KINDS) and the exported grouped ReLU kernel.
    for layout_A, layout_B, activation in [("row", "row", "relu"), ("col", "col", "identity"), ("row", "col", "relu")]:
        plan = gemmkit.GroupedGemm(element=np.float16, layout_A=layout_A, layout_B=layout_B, layout_C="row",
                                   element_accumulator=np.float32, cc=cc)
        plan.activation = activation
        out.append(plan.construct())
    # gemmkit.torch.grouped_mm's (test_torch_ops_moe.py): bf16 experts, transposed and row-major weights.
    for layout_B in ("col", "row"):
        out.append(gemmkit.GroupedGemm(element="bf16", layout_A="row", layout_B=layout_B, layout_C="row",
                                       element_accumulator=np.float32, cc=cc).construct())
    return out


def notebook_epilogue(accum, alpha, C, beta, aux, bias):
    """The reference notebook's epilogue visitor tree (04_epilogue_visitor.ipynb)."""
    F = alpha * accum + (beta * C + aux)
    E = relu(F + 1) + bias
    D = E + F
    return D, F


def notebook_examples(m=256, n=128):
    zeros = lambda *shape: np.zeros(shape, np.float16)  # noqa: E731
    return {"accum": gemmkit.Tensor(element=np.float32, shape=(m, n)), "alpha": 0.5, "C": zeros(m, n), "beta": 0.5,
            "aux": zeros(m, n), "bias": zeros(m, 1), "D": zeros(m, n), "F": zeros(m, n)}


def reductions_epilogue(accum, alpha, C, beta, aux, cbias, rbias):
    """The reference's mixed DAG: a store, a row and a column reduction, both broadcasts."""
    F = alpha * accum + (beta * C + aux)
    F_row_max = max(F, dim=[0, 1])
    E = relu(F + 1) + cbias + rbias
    E_col_max = max(E, dim=[0, 2])
    D = E + F
    return D, F, F_row_max, E_col_max


def reductions_examples(l=2, m=256, n=128):
    f16 = lambda *shape: gemmkit.Tensor(element=np.float16, shape=shape)  # noqa: E731
    f32 = lambda *shape: gemmkit.Tensor(element=np.float32, shape=shape)  # noqa: E731
    return {"accum": f16(l, m, n), "alpha": 1.0, "C": f16(l, m, n), "beta": 1.0, "aux": f16(l, m, n),
            "cbias": f16(m, 1), "rbias": f16(n), "D": f16(l, m, n), "F": f16(l, m, n), "F_row_max": f32(n),
            "E_col_max": f32(m, 1)}


def evt_spec(fn, examples, cc=None, kernel_cc=None):
    plan = fp16_plan(cc, kernel_cc=kernel_cc)
    plan.epilogue_visitor = trace(fn, examples)
    return plan.construct()


def evt_export_specs(cc=None):
    """test_torch_emit_evt.py's exported epilogue trees: the notebook's on this GPU's kernel and on CUTLASS 2.x
    (kernel_cc=80), and the reductions' on this GPU's."""
    return {"native": evt_spec(notebook_epilogue, notebook_examples(), cc),
            "sm80": evt_spec(notebook_epilogue, notebook_examples(), cc, kernel_cc=80),
            "reductions": evt_spec(reductions_epilogue, reductions_examples(), cc)}


def bias_act_specs(cc=None):
    """gemmkit.torch.gemm_bias_act's plans in test_torch_ops_bias_act.py (BIAS_ACT_CASES; B a linear layer's transposed
    weight), where torch is installed."""
    try:
        import torch
        import gemmkit.torch as gt
    except ImportError:
        return []
    out = []
    for dtype, has_bias, has_residual, activation, slope in BIAS_ACT_CASES:
        plan = gemmkit.Gemm(element=getattr(torch, dtype), layout_A="row", layout_B="col", layout_C="row",
                            element_accumulator=np.float32, cc=cc)
        plan.epilogue_visitor = gt._bias_act_tree(has_bias, has_residual, activation, slope)
        out.append(plan.construct())
    return out


# (dtype, bias, residual, activation, leaky_relu slope): gemm_bias_act's cases in test_torch_ops_bias_act.py.
BIAS_ACT_CASES = [("float16", False, False, "identity", 0.01), ("float16", True, False, "relu", 0.01),
                  ("float16", False, True, "gelu", 0.01), ("float16", True, True, "leaky_relu", 0.2),
                  ("bfloat16", True, False, "silu", 0.01), ("bfloat16", True, True, "leaky_relu", 0.2)]


def fp8_specs(cc=None):
    """test_fp8.py's SM90 kernels (none on an older GPU): the plans of its gpu tests, as spec_for picks them."""
    if (cc or gemmkit.device_cc()) < 90:
        return []
    out = []
    for a, b, d in [("e4m3", "e4m3", "bf16"), ("e4m3", "e5m2", "f16"), ("e5m2", "e5m2", "f32")]:
        plan = gemmkit.Gemm(element_A=a, element_B=b, element_C=d, element_D=d, layout_A="row", layout_B="col",
                            layout_C="row", cc=cc)
        out.append(plan.construct())
    rowwise = gemmkit.Gemm(element_A="e4m3", element_B="e4m3", element_C="bf16", element_D="bf16", layout_A="row",
                           layout_B="col", layout_C="row", cc=cc)
    rowwise.scale = "row_and_column"
    out.append(rowwise.construct())
    # The block-scaled and fast-accumulating kernels of test_fp8.py and (without C) test_torch_ops_scaled_mm.py
    # (192 x 320 x 400).
    kinds = [("bf16", True, False), ("f32", True, False), ("bf16", False, False), ("bf16", False, True)]
    for (d, block, fast), without_c in itertools.product(kinds, [False, True]):
        plan = gemmkit.Gemm(element_A="e4m3", element_B="e4m3", element_C="void" if without_c else d, element_D=d,
                            layout_A="row", layout_B="col", layout_C="row", element_accumulator="f32", cc=cc)
        if block:
            plan.block_scaling = "blockwise"
        else:
            plan.scale = "row_and_column"
        if fast:
            plan.math_operation = "multiply_add_fast_accum"
        out.append(plan.spec_for_problem(192, 320, 400))
        if without_c and d == "bf16" and not fast:  # scaled_mm's bias (one value per column of D)
            plan.bias = "column"
            out.append(plan.spec_for_problem(192, 320, 400))
    # examples/python/fp8.py's (512 x 768 x 1024): per tensor, row-wise and blockwise.
    for scale, block in [("none", "none"), ("row_and_column", "none"), ("none", "blockwise")]:
        plan = gemmkit.Gemm(element_A="e4m3", element_B="e4m3", element_C="bf16", element_D="bf16", layout_A="row",
                            layout_B="col", layout_C="row", element_accumulator="f32", cc=cc)
        plan.scale, plan.block_scaling = scale, block
        out.append(plan.spec_for_problem(512, 768, 1024))
    # The MoE form's block-scaled experts (test_fp8.py, and gemmkit.torch.scaled_grouped_mm in test_torch_ops_moe.py).
    moe = gemmkit.GroupedGemm(element_A="e4m3", element_B="e4m3", element_C="bf16", element_D="bf16",
                              layout_A="row", layout_B="col", layout_C="row", element_accumulator="f32", cc=cc)
    moe.block_scaling = "blockwise"
    out.append(moe.construct())
    return out


def conv_specs(cc=None):
    """test_conv2d.py's split-K kernels (parallel split-K wgrad with ReLU; the split run() picks for a long wgrad)
    and test_torch_emit_conv.py's exported fprop kernel, asked for with NHWC arrays of their tests' shapes."""
    zeros = lambda *shape: np.zeros(shape, np.float16)  # noqa: E731
    # Split-K is the CUTLASS 2.x family's (kernel_cc=80): SM90 conv plans never split.
    relu = gemmkit.Conv2d(kind="wgrad", element=np.float16, element_accumulator=np.float32, cc=cc, kernel_cc=80)
    relu.activation = "relu"
    relu.set_split_k("parallel", 2)
    out = [relu.spec_for(zeros(4, 16, 16, 32), zeros(4, 16, 16, 16), zeros(32, 3, 3, 16), zeros(32, 3, 3, 16),
                         padding=1, beta=-1.0)]
    auto = gemmkit.Conv2d(kind="wgrad", element=np.float16, element_accumulator=np.float32, cc=cc, kernel_cc=80)
    out.append(auto.spec_for(zeros(32, 28, 28, 64), zeros(32, 28, 28, 64), None, zeros(64, 1, 1, 64)))
    fprop = gemmkit.Conv2d(kind="fprop", element=np.float16, element_accumulator=np.float32, cc=cc, kernel_cc=80)
    fprop.iterator_algorithm = "optimized"
    out.append(fprop.construct())
    return out + pointwise_specs(cc) + matches_torch_specs(cc)


def matches_torch_specs(cc=None):
    """test_conv2d.py's check_against_torch kernels (x 2x13x11x16, w 24x3x3x16) on both families, for the float16
    and float32 cases (numpy has no bfloat16); before this list the SM90 ones compiled inside the tests, the last
    3 % of the tier."""
    out = []
    cases = {80: [(np.float16, 1, 1, 1), (np.float16, 2, 1, 1), (np.float32, 2, 3, 1)],
             90: [(np.float16, 1, 1, 1), (np.float16, 2, 1, 1)]}
    for kernel_cc, geometries in cases.items():
        if kernel_cc == 90 and (cc or gemmkit.device_cc()) < 90:
            continue
        for dtype, stride, padding, dilation in geometries:
            args = dict(stride=stride, padding=padding, dilation=dilation)
            x, w = np.zeros((2, 13, 11, 16), dtype), np.zeros((24, 3, 3, 16), dtype)
            y = np.zeros(gemmkit.Conv2d.output_size(x.shape, w.shape, [padding] * 2, [stride] * 2, [dilation] * 2),
                         dtype)
            for kind, (a, b, d) in {"fprop": (x, w, y), "dgrad": (y, w, x), "wgrad": (y, x, w)}.items():
                if kind == "dgrad" and stride > 1 and (kernel_cc == 90 or dilation > 1):
                    continue  # refused (a ConfigError the test expects)
                plan = gemmkit.Conv2d(kind=kind, element=dtype, element_accumulator=np.float32, cc=cc,
                                      kernel_cc=kernel_cc)
                out.append(plan.spec_for(a, b, None, d, **args))
    return out


def pointwise_specs(cc=None):
    """test_conv2d.py's 1x1 convs at the default kernel_cc: on SM90 they run the SM90 GEMM family's kernels."""
    zeros = lambda *shape: np.zeros(shape, np.float16)  # noqa: E731
    x, w, y = zeros(2, 13, 11, 16), zeros(24, 1, 1, 16), zeros(2, 13, 11, 24)  # N, H, W, C = 2, 13, 11, 16; K = 24
    operands = {"fprop": (x, w, y), "dgrad": (y, w, x), "wgrad": (y, x, w)}
    out = []
    for kind, (a, b, d) in operands.items():
        plan = gemmkit.Conv2d(kind=kind, element=np.float16, element_accumulator=np.float32, cc=cc)
        out.append(plan.spec_for(a, b, None, d))
    return out


if __name__ == "__main__":
    import sys
    import time

    start = time.perf_counter()  # an optional argument names the cc (90 on a machine without a GPU)
    built = gemmkit.compile_many(specs(int(sys.argv[1]) if len(sys.argv) > 1 else None))
    misses = sum(not k.cache_hit for k in built)
    print(f"{len(built)} kernels ({misses} built, {len(built) - misses} cached) in {time.perf_counter() - start:.1f} s"
          f" into {gemmkit.cache_dir()}")
    for kernel in built:  # key and name: tools/dev/carry-cache --keys takes this listing
        print(f"  {kernel.cache_key} {kernel.kernel_name}")
