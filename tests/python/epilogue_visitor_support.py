"""tests/python/epilogue_visitor_support.py: what the test_epilogue_visitor_*.py files share: the unit tier's
example sizes and tensors, the SM90 plan and the default kernel names, the reference notebook's epilogue and the mixed
DAG (gpu_specs' functions) with their examples, and the traced functions both the plan tests and the GPU cases run
(the dead input of the reference's test_no_lca, its evt_layout cases)."""
import numpy as np

import gemmkit
import gpu_specs
from gemmkit.epilogue import permute, relu, reshape


T = gemmkit.Tensor
L, M, N = 6, 512, 256  # the examples' (L, M, N) in the unit tier, as the reference's interface tests
SM90_DEFAULT = "cutlass3x_sm90_tensorop_s0x0x0gemm_f16_f16_f32_f16_f16_256x256x64_2x1x1_0_ttt_align8"
SM80_DEFAULT = "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8"


def f16(*shape, **kwargs):
    return T(element=np.float16, shape=shape, **kwargs)


def f32(*shape):
    return T(element=np.float32, shape=shape)


def sm90_plan(**kwargs):
    return gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32,
                        cc=90, **kwargs)


def formulas(visitor):
    return str(visitor).splitlines()


# The notebook's function and the reference's mixed DAG, as the Python tier's prebuild list (gpu_specs) has them.
example_epilogue = gpu_specs.notebook_epilogue
evt_mixed_dag = gpu_specs.reductions_epilogue


def notebook_examples(m=M, n=N, tensors=np):
    half = getattr(tensors, "float16")  # numpy's or torch's: each module's zeros takes its own dtype
    return {"accum": T(element=np.float32, shape=(m, n), layout_tag=gemmkit.LayoutType.RowMajor), "alpha": 0.5,
            "C": tensors.zeros((m, n), dtype=half), "beta": 0.5, "aux": tensors.zeros((m, n), dtype=half),
            "bias": tensors.zeros((m, 1), dtype=half), "D": tensors.zeros((m, n), dtype=half),
            "F": tensors.zeros((m, n), dtype=half)}


def mixed_examples(l=L, m=M, n=N, batched=True):
    full = (l, m, n) if batched else (m, n)
    return {"accum": f16(*full), "alpha": 1.0, "C": f16(*full), "beta": 1.0, "aux": f16(*full),
            "cbias": f16(m, 1), "rbias": f16(n), "D": f16(*full), "F": f16(*full), "F_row_max": f32(n),
            "E_col_max": f32(m, 1)}


def evt_dead_input(accum, bias):
    E = relu(accum)
    F = E + bias  # noqa: F841 (dead: the reference's test_no_lca)
    tmp_2 = E + 2
    D = tmp_2 + E
    return D


# The reference's evt_layout cases: permute() of the last two axes and reshape() are undone at trace time, so the
# kernel's tree has neither; the tensors they touch are read and written through views of the same memory.
def evt_layout_permute_back(accum, alpha, C):
    F = alpha * accum
    F_permute = permute(F, indices=(0, 2, 1))
    D_permute = F_permute + permute(C, indices=(0, 2, 1))
    D = permute(D_permute, indices=(0, 2, 1))
    return D, F


def evt_layout_permute(accum, alpha, C):
    F = alpha * accum
    F_permute = permute(F, indices=(0, 2, 1))
    D = F_permute + C
    return D, F


def evt_layout_reshape_input(accum, alpha, TensorE):
    F = alpha * accum
    E_reshape = reshape(TensorE, new_shape=(512, 1))
    D = F + E_reshape
    return D


def evt_layout_reshape_batch(accum, alpha, TensorE):
    F = alpha * accum
    F_reshape = reshape(F, new_shape=(2, 3, 512, 256))
    D = F_reshape + TensorE
    return D
