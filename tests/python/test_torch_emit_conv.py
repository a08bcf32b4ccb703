"""tests/python/test_torch_emit_conv.py: gemmkit.emit.pytorch on Conv2d kernels, fprop, dgrad and wgrad, CUTLASS
2.x (kernel_cc=80) and SM90 (helpers shared with the other test_torch_emit_*.py files: torch_emit_support.py). Unit:
the files it writes, and the split-K mode and unit stride its binding names (no nvcc, no GPU). Compile (nvcc, torch,
no GPU): the SM80 wgrad and SM90 dgrad JIT builds and their checks on meta tensors. GPU: the exported modules against
torch.nn.functional.conv2d and torch.nn.grad, exactly, serial and parallel split-K, the reference's export problem,
and their errors."""
import json

import numpy as np
import pytest

import gemmkit
from gemmkit import _gemmkit
from isolated import run_isolated
from torch_emit_support import setup_flags


def conv_plan(cc, kind="fprop", kernel_cc=None):
    return gemmkit.Conv2d(kind=kind, element=np.float16, element_accumulator=np.float32, cc=cc, kernel_cc=kernel_cc)


# run's parameters after the output size dgrad and wgrad take first, as the reference's run spells them.
CONV_PARAMETERS = ("Tensor A, Tensor B, Tensor? C=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, "
                   "float alpha=1.0, float beta=0.0, str split_k_mode='serial', int split_k_slices=1")
CONV_EXPORTS = [  # (kind, kernel_cc, activation, family, split-K, run's first parameter, result, what it computes)
    ("fprop", 80, None, "sm80_conv2d", "SERIAL", "", "output", "torch.nn.functional.conv2d(A, B)"),
    ("fprop", 90, ("leaky_relu", 0.25), "sm90_conv2d", "NONE", "", "output", "torch.nn.functional.conv2d(A, B)"),
    ("dgrad", 80, None, "sm80_conv2d", "SERIAL", "int[4] input_size, ", "grad_input",
     "torch.nn.grad.conv2d_input(input_size, B, A)"),
    ("dgrad", 90, "relu", "sm90_conv2d", "NONE", "int[4] input_size, ", "grad_input",
     "torch.nn.grad.conv2d_input(input_size, B, A)"),
    ("wgrad", 80, ("leaky_relu", 0.25), "sm80_conv2d", "SERIAL", "int[4] weight_size, ", "grad_weight",
     "torch.nn.grad.conv2d_weight(B, weight_size, A)"),
    ("wgrad", 90, None, "sm90_conv2d", "NONE", "int[4] weight_size, ", "grad_weight",
     "torch.nn.grad.conv2d_weight(B, weight_size, A)"),
]


@pytest.mark.parametrize("kind, kernel_cc, activation, family, split_k, size, result, formula", CONV_EXPORTS)
def test_writes_a_conv2d_kernel_its_binding_and_setup(tmp_path, kind, kernel_cc, activation, family, split_k, size,
                                                      result, formula):
    plan = conv_plan(90, kind, kernel_cc)
    if activation is not None:
        plan.activation = activation
    op = plan.construct()
    assert op.family == gemmkit.KernelFamily[family]
    assert gemmkit.emit.pytorch(op, "my_conv", 90, str(tmp_path)) is None
    assert (tmp_path / "my_conv_kernel.cu").read_text() == _gemmkit.render(op).text
    binding = (tmp_path / "my_conv.cpp").read_text()
    assert f"// {kind} kernel\n//   {op.name()}\n" in binding
    for line in (f"/*kind=*/GK_TORCH_{kind.upper()},", "/*a=*/GK_DTYPE_F16,", "/*b=*/GK_DTYPE_F16,",
                 "/*c=*/GK_DTYPE_F16,", "/*d=*/GK_DTYPE_F16,", "/*alignment_a=*/8,", "/*alignment_b=*/8,",
                 "/*alignment_c=*/8,", "/*alignment_d=*/8,", f"/*split_k=*/GK_TORCH_SPLIT_K_{split_k},",
                 f"/*kernel_cc=*/{kernel_cc},", "/*unit_stride=*/0,",
                 "gk_torch_register_conv2d_v2(ns, kSchema, &kKernel, &gemmkit::torch_module::kConv2dEntryPoints)"):
        assert line in binding
    leaky = op.activation == gemmkit.Activation.leaky_relu
    assert f"/*takes_slope=*/{int(leaky)}," in binding
    slope = ", float slope=0.01" if leaky else ""
    assert f'"run({size}{CONV_PARAMETERS}{slope}) -> Tensor"' in binding
    doc = f'"{result} = {op.activation.name}(alpha * {formula} + beta * C) by the CUTLASS kernel {op.name()}"'
    assert doc in binding
    assert "{{" not in binding and "torch/" not in binding
    text = (tmp_path / "setup.py").read_text()
    assert '["my_conv.cpp", "gemmkit/torch_export_conv2d.cpp", "my_conv_kernel.cu"]' in text
    assert f"-gencode=arch=compute_90a,code={op.arch_flag()}" in setup_flags(tmp_path / "setup.py")["flags"]
    glue = (tmp_path / "gemmkit" / "torch_export_conv2d.cpp").read_text()
    assert 'extern "C" const char* gk_torch_register_conv2d_v2(' in glue
    assert '#include "gemmkit/torch_export_common.h"' in glue


def test_a_parallel_split_k_module_and_a_unit_stride_dgrad_kernel_say_so(tmp_path):
    """The glue refuses the split-K mode or the stride the exported kernel does not compute: the binding says which."""
    plan = conv_plan(80)
    plan.set_split_k("parallel", 3)
    x, w, y = (np.zeros(s, np.float16) for s in ((1, 7, 7, 256), (64, 1, 1, 256), (1, 7, 7, 64)))
    parallel = plan.spec_for(x, w, None, y)
    assert parallel.split_k_mode == gemmkit.SplitKMode.parallel
    gemmkit.emit.pytorch(parallel, "parallel_conv", 80, str(tmp_path / "parallel"))
    binding = (tmp_path / "parallel" / "parallel_conv.cpp").read_text()
    assert "/*split_k=*/GK_TORCH_SPLIT_K_PARALLEL," in binding and f"//   {parallel.name()}\n" in binding
    dgrad = conv_plan(80, "dgrad")
    dgrad.stride_support = "unity"
    gemmkit.emit.pytorch(dgrad.construct(), "unity_dgrad", 80, str(tmp_path / "unity"))
    binding = (tmp_path / "unity" / "unity_dgrad.cpp").read_text()
    assert "/*unit_stride=*/1," in binding and "/*split_k=*/GK_TORCH_SPLIT_K_SERIAL," in binding


# ---- compile tier: nvcc and torch, no GPU ------------------------------------------------------------------

CONV_JIT_BUILD = """
    import json, os, torch, numpy as np, gemmkit
    out = os.environ["OUT_DIR"]
    def plan(kind, kernel_cc):
        return gemmkit.Conv2d(kind=kind, element=np.float16, element_accumulator=np.float32, cc=90,
                              kernel_cc=kernel_cc)
    ops = {"wgrad80": plan("wgrad", 80).construct(), "dgrad90": plan("dgrad", 90).construct()}
    gemmkit.compile_many(list(ops.values()))
    mods = {key: gemmkit.emit.pytorch(op, "jit_" + key, 90, out + "/" + key, jit=True) for key, op in ops.items()}
    half = lambda *shape: torch.empty(*shape, dtype=torch.float16, device="meta").to(
        memory_format=torch.channels_last)
    dy, x, w = half(2, 24, 8, 8), half(2, 16, 8, 8), half(24, 16, 3, 3)
    dw = mods["wgrad80"].run((24, 16, 3, 3), dy, x, None, 1, 1, split_k_mode="serial", split_k_slices=3)
    dx = mods["dgrad90"].run([2, 16, 8, 8], dy, w, half(2, 16, 8, 8), padding=1, beta=1.0)
    errors = []
    for key, args, kwargs in [
            ("wgrad80", ((24, 16, 3, 3), half(2, 24, 7, 8), x), dict(padding=1)),
            ("wgrad80", ((24, 8, 3, 3), dy, x), dict(padding=1)),
            ("wgrad80", ((24, 16, 3, 3), dy, x), dict(padding=1, split_k_mode="parallel", split_k_slices=2)),
            ("wgrad80", ((24, 16, 3, 3), dy, x), dict(padding=1, split_k_mode="banana")),
            ("wgrad80", ((24, 16, 3, 3), half(0, 24, 8, 8), half(0, 16, 8, 8)), dict(padding=1)),
            ("dgrad90", ((2, 16, 16, 16), dy, w), dict(stride=2, padding=1)),
            ("dgrad90", ((2, 16, 8, 8), dy, w), dict(padding=1, split_k_slices=2)),
            ("dgrad90", ((2, 16, 8), dy, w), dict(padding=1)),
            ("dgrad90", ((2, 16, 8, 8), dy, w.contiguous()), dict(padding=1)),
            ("dgrad90", ((2, 16, 8, 8), dy, w, half(2, 16, 8, 7)), dict(padding=1, beta=1.0))]:
        try:
            mods[key].run(*args, **kwargs)
            errors.append("")
        except ValueError as error:
            errors.append(str(error).splitlines()[0])
    print(json.dumps({"dw": [list(dw.shape), dw.is_contiguous(memory_format=torch.channels_last)],
                      "dx": [list(dx.shape), dx.is_contiguous(memory_format=torch.channels_last)],
                      "names": {key: mod.kernel_name == ops[key].name() for key, mod in mods.items()},
                      "errors": errors}))
"""


@pytest.mark.compile
def test_conv2d_dgrad_and_wgrad_exports_build_and_check_their_arguments(tmp_path):
    """The SM80 wgrad and SM90 dgrad exports built with jit=True (the conv glue compiled for this torch), run on meta
    tensors: the outputs' shapes and memory format, and the glue's refusals, which come before anything runs."""
    pytest.importorskip("torch")
    result = json.loads(run_isolated(CONV_JIT_BUILD, timeout=1200, GEMMKIT_CACHE_DIR=str(tmp_path / "cache"),
                                     OUT_DIR=str(tmp_path / "out")))
    assert result["names"] == {"wgrad80": True, "dgrad90": True}
    assert result["dw"] == [[24, 16, 3, 3], True] and result["dx"] == [[2, 16, 8, 8], True]
    errors = result["errors"]
    assert ("A (grad_output) has shape [2, 24, 7, 8] but the convolution of an input (2, 16, 8, 8) with a filter "
            "(24, 16, 3, 3) (stride 1x1, padding 1x1, dilation 1x1) gives (2, 24, 8, 8)") in errors[0]
    assert "B (input) has 16 channels but weight_size 8; the kernel computes groups = 1" in errors[1]
    assert "split_k_mode 'parallel' needs the parallel split-K kernel" in errors[2]
    assert "split_k_mode is 'banana'; pass 'serial' or 'parallel'" in errors[3]
    assert "B (input) has an empty batch, over which grad_weight sums nothing" in errors[4]
    assert "computes dgrad at unit stride only" in errors[5] and "kernel_cc=80" in errors[5]
    assert "which has no split-K; split_k_slices is 2" in errors[6] and "kernel_cc=80" in errors[6]
    assert "input_size must be 4 extents" in errors[7]
    assert ("B (weight) has shape [24, 16, 3, 3] and strides [144, 9, 3, 1] but the kernel reads channels_last"
            in errors[8])
    assert "C has shape [2, 16, 8, 7] but the grad_input is (2, 16, 8, 8)" in errors[9]


# ---- gpu tier: exported Conv2d kernels, fprop, dgrad and wgrad, CUTLASS 2.x (kernel_cc=80) and SM90 ------------


@pytest.fixture(scope="module")
def exported_convs(tmp_path_factory):
    """f16 Conv2d kernels of each kind for this GPU, kernel_cc=80 (fprop with the optimized iterators: the export
    takes them) and the GPU's own (SM90 on an H200), plus a kernel_cc=80 parallel split-K wgrad module, exported
    and built with jit=True; keyed (kind, kernel_cc) and "wgrad_parallel"."""
    torch = pytest.importorskip("torch")
    cc = gemmkit.device_cc()
    ops = {}
    for kind in ("fprop", "dgrad", "wgrad"):
        for kernel_cc in sorted({80, cc if cc == 90 else 80}):
            plan = gemmkit.Conv2d(kind=kind, element=torch.float16, element_accumulator=torch.float32, cc=cc,
                                  kernel_cc=kernel_cc)
            if (kind, kernel_cc) == ("fprop", 80):
                plan.iterator_algorithm = "optimized"
            ops[kind, kernel_cc] = plan.construct()
    parallel = gemmkit.Conv2d(kind="wgrad", element=torch.float16, element_accumulator=torch.float32, cc=cc,
                              kernel_cc=80)
    parallel.set_split_k("parallel", 3)
    dy, x, dw = (np.zeros(s, np.float16) for s in ((2, 13, 11, 24), (2, 13, 11, 16), (24, 3, 3, 16)))  # NHWC, KRSC
    ops["wgrad_parallel"] = parallel.spec_for(dy, x, None, dw, padding=1)
    assert ops["wgrad_parallel"].split_k_mode == gemmkit.SplitKMode.parallel
    gemmkit.compile_many(list(ops.values()))  # in parallel; the exports below find them in the cache
    out = tmp_path_factory.mktemp("convs")
    modules = {}
    for key, op in ops.items():
        name = "gk_test_conv_" + ("_".join(map(str, key)) if isinstance(key, tuple) else key)
        modules[key] = gemmkit.emit.pytorch(op, name, cc, str(out / name), jit=True)
    return torch, modules


def conv_integers(torch, shape, seed, low=-2, high=3):
    """Small integers in channels_last memory: every sum here is exact in the kernels' f32 accumulators and the
    float64 reference, and both round it once to f16, so results compare exactly."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=generator).half().cuda().to(memory_format=torch.channels_last)


def conv_geometry(args):
    """(pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w) of run's keyword arguments."""
    pair = lambda value: (value, value) if isinstance(value, int) else tuple(value)  # noqa: E731
    return (*pair(args.get("padding", 0)), *pair(args.get("stride", 1)), *pair(args.get("dilation", 1)))


def conv_problem(x_size, w_size, args):
    """The gemmkit.shape problem of an input (N, C, H, W) and a filter (K, C, R, S) under run's keyword arguments."""
    n, c, h, w = x_size
    k, _, r, s = w_size
    return gemmkit.shape.Conv2DProblemSize(n, h, w, c, k, r, s, c, *conv_geometry(args))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", [80, 90])
def test_exported_conv2d_fprop_matches_torch_conv2d(exported_convs, kernel_cc):
    torch, modules = exported_convs
    mod = modules.get(("fprop", kernel_cc))
    if mod is None:
        pytest.skip(f"kernel_cc={kernel_cc} conv kernels need an SM90 GPU")
    x, w = conv_integers(torch, (2, 16, 13, 11), 1), conv_integers(torch, (24, 16, 3, 3), 2)
    for args in (dict(), dict(padding=1), dict(stride=2, padding=(1, 2)), dict(stride=(1, 2), dilation=2)):
        y = mod.run(x, w, **args)
        expected = torch.nn.functional.conv2d(x.double(), w.double(), **args)
        assert y.dtype == torch.float16 and y.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(y, expected.half(), rtol=0, atol=0, msg=lambda m: f"{args}: {m}")
    C = conv_integers(torch, (2, 24, 13, 11), 3)
    y = mod.run(x, w, C, 1, 1, alpha=2.0, beta=-1.0)
    expected = 2.0 * torch.nn.functional.conv2d(x.double(), w.double(), padding=1) - C.double()
    torch.testing.assert_close(y, expected.half(), rtol=0, atol=0)
    if kernel_cc == 80:  # serial split-K: the slices add into the output in turn, exactly here
        for slices in (2, 3):
            split = mod.run(x, w, C, 1, 1, alpha=1.0, beta=1.0, split_k_mode="serial", split_k_slices=slices)
            expected = torch.nn.functional.conv2d(x.double(), w.double(), padding=1) + C.double()
            torch.testing.assert_close(split, expected.half(), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", [80, 90])
def test_exported_conv2d_dgrad_matches_conv2d_input(exported_convs, kernel_cc):
    torch, modules = exported_convs
    mod = modules.get(("dgrad", kernel_cc))
    if mod is None:
        pytest.skip(f"kernel_cc={kernel_cc} conv kernels need an SM90 GPU")
    input_size, w = (2, 16, 13, 11), conv_integers(torch, (24, 16, 3, 3), 4)
    geometries = [dict(), dict(padding=1), dict(padding=(1, 2))]
    # CUTLASS 2.x strided dgrad takes strides (not dilations); SM90's TMA im2col dgrad takes dilations (unit stride).
    geometries += [dict(stride=2, padding=(1, 2)), dict(stride=(1, 2))] if kernel_cc == 80 else [
        dict(dilation=2, padding=2)]
    for seed, args in enumerate(geometries):
        ps = conv_problem(input_size, w.shape, args)
        dy = conv_integers(torch, (ps.N, ps.K, ps.P, ps.Q), 10 + seed)
        dx = mod.run(input_size, dy, w, **args)
        expected = torch.nn.grad.conv2d_input(input_size, w.double(), dy.double(), **args)
        assert dx.dtype == torch.float16 and dx.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(dx, expected.half(), rtol=0, atol=0, msg=lambda m: f"{args}: {m}")
    dy = conv_integers(torch, (2, 24, 13, 11), 5)
    C = conv_integers(torch, input_size, 6)
    dx = mod.run(input_size, dy, w, C, 1, 1, alpha=2.0, beta=-1.0)
    expected = 2.0 * torch.nn.grad.conv2d_input(input_size, w.double(), dy.double(), padding=1) - C.double()
    torch.testing.assert_close(dx, expected.half(), rtol=0, atol=0)
    if kernel_cc == 80:
        split = mod.run(input_size, dy, w, C, 1, 1, beta=1.0, split_k_mode="serial", split_k_slices=3)
        expected = torch.nn.grad.conv2d_input(input_size, w.double(), dy.double(), padding=1) + C.double()
        torch.testing.assert_close(split, expected.half(), rtol=0, atol=0)
    else:
        with pytest.raises(ValueError, match="unit stride only.*kernel_cc=80"):
            mod.run((2, 16, 26, 22), dy, w, stride=2, padding=1)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", [80, 90])
def test_exported_conv2d_wgrad_matches_conv2d_weight(exported_convs, kernel_cc):
    torch, modules = exported_convs
    mod = modules.get(("wgrad", kernel_cc))
    if mod is None:
        pytest.skip(f"kernel_cc={kernel_cc} conv kernels need an SM90 GPU")
    x, weight_size = conv_integers(torch, (2, 16, 13, 11), 7), (24, 16, 3, 3)
    for seed, args in enumerate((dict(), dict(padding=1), dict(stride=2, padding=(1, 2)),
                                 dict(stride=(1, 2), dilation=2))):
        ps = conv_problem(x.shape, weight_size, args)
        dy = conv_integers(torch, (ps.N, ps.K, ps.P, ps.Q), 20 + seed)
        dw = mod.run(weight_size, dy, x, **args)
        expected = torch.nn.grad.conv2d_weight(x.double(), weight_size, dy.double(), **args)
        assert dw.dtype == torch.float16 and dw.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(dw, expected.half(), rtol=0, atol=0, msg=lambda m: f"{args}: {m}")
    dy = conv_integers(torch, (2, 24, 13, 11), 8)
    C = conv_integers(torch, weight_size, 9)
    dw = mod.run(weight_size, dy, x, C, 1, 1, alpha=2.0, beta=-1.0)
    expected = 2.0 * torch.nn.grad.conv2d_weight(x.double(), weight_size, dy.double(), padding=1) - C.double()
    torch.testing.assert_close(dw, expected.half(), rtol=0, atol=0)
    expected = torch.nn.grad.conv2d_weight(x.double(), weight_size, dy.double(), padding=1) + C.double()
    if kernel_cc == 80:
        for slices in (2, 3, 7):
            split = mod.run(weight_size, dy, x, C, 1, 1, beta=1.0, split_k_mode="serial", split_k_slices=slices)
            torch.testing.assert_close(split, expected.half(), rtol=0, atol=0)
    else:
        with pytest.raises(ValueError, match="no split-K.*kernel_cc=80"):
            mod.run(weight_size, dy, x, C, 1, 1, beta=1.0, split_k_slices=3)


@pytest.mark.gpu
def test_exported_parallel_split_k_wgrad_matches_conv2d_weight(exported_convs):
    """The parallel split-K module: the conv kernel's partial sums, then the reduction kernel with the epilogue."""
    torch, modules = exported_convs
    mod = modules["wgrad_parallel"]
    x, weight_size = conv_integers(torch, (2, 16, 13, 11), 30), (24, 16, 3, 3)
    dy, C = conv_integers(torch, (2, 24, 13, 11), 31), conv_integers(torch, weight_size, 32)
    expected = 2.0 * torch.nn.grad.conv2d_weight(x.double(), weight_size, dy.double(), padding=1) - C.double()
    for slices in (1, 3, 7):
        dw = mod.run(weight_size, dy, x, C, 1, 1, 1, 2.0, -1.0, "parallel", slices)
        torch.testing.assert_close(dw, expected.half(), rtol=0, atol=0, msg=lambda m: f"{slices}: {m}")
    with pytest.raises(ValueError, match="is a parallel split-K module; pass split_k_mode='parallel'"):
        mod.run(weight_size, dy, x, C, 1, 1, beta=1.0, split_k_mode="serial", split_k_slices=3)
    with pytest.raises(ValueError, match="split_k_mode 'parallel' needs the parallel split-K kernel"):
        modules["wgrad", 80].run(weight_size, dy, x, padding=1, split_k_mode="parallel", split_k_slices=3)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel_cc", [80, 90])
def test_exported_conv2d_runs_the_references_problem(exported_convs, kernel_cc):
    """The reference's own export test: Conv2DProblemSize(1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 3, 3, 1, 1), called as it
    calls run, alpha 1 and beta 0.5, on integers in [-4, 3]."""
    torch, modules = exported_convs
    if ("fprop", kernel_cc) not in modules:
        pytest.skip(f"kernel_cc={kernel_cc} conv kernels need an SM90 GPU")
    ps = gemmkit.shape.Conv2DProblemSize(1, 4, 4, 16, 8, 3, 3, 16, 0, 0, 3, 3, 1, 1)
    stride, padding = (ps.stride_h, ps.stride_w), (ps.pad_h, ps.pad_w)
    x_size, w_size, y_size = (ps.N, ps.C, ps.H, ps.W), (ps.K, ps.C, ps.R, ps.S), (ps.N, ps.K, ps.P, ps.Q)
    alpha, beta = 1.0, 0.5
    x, w = conv_integers(torch, x_size, 40, -4, 4), conv_integers(torch, w_size, 41, -4, 4)
    dy = conv_integers(torch, y_size, 42, -4, 4)
    geometry = dict(stride=stride, padding=padding)
    # Per kind: C, the expected result and the call, as the reference's test makes it.
    C = {kind: conv_integers(torch, size, seed, -4, 4)
         for seed, (kind, size) in enumerate((("fprop", y_size), ("dgrad", x_size), ("wgrad", w_size)), 43)}
    convs = {"fprop": torch.nn.functional.conv2d(x.double(), w.double(), **geometry),
             "dgrad": torch.nn.grad.conv2d_input(x_size, w.double(), dy.double(), **geometry),
             "wgrad": torch.nn.grad.conv2d_weight(x.double(), w_size, dy.double(), **geometry)}
    expected = {kind: (alpha * conv + beta * C[kind].double()).half() for kind, conv in convs.items()}
    operands = {"fprop": (x, w), "dgrad": (x_size, dy, w), "wgrad": (w_size, dy, x)}

    def run(kind, **split):
        return modules[kind, kernel_cc].run(*operands[kind], C[kind], stride, padding, alpha=alpha, beta=beta, **split)

    kinds = ["fprop", "wgrad"]
    if kernel_cc == 90:  # stride 3: SM90's TMA im2col dgrad takes unit strides only
        with pytest.raises(ValueError, match="unit stride only.*kernel_cc=80"):
            run("dgrad")
    else:
        kinds.append("dgrad")
    for kind in kinds:
        torch.testing.assert_close(run(kind), expected[kind], rtol=0, atol=0, msg=lambda m: f"{kind}: {m}")
    if kernel_cc == 80:  # serial split-K as the reference's test calls it (fprop and wgrad)
        for kind in ("fprop", "wgrad"):
            for slices in (3, 7):
                torch.testing.assert_close(run(kind, split_k_mode="serial", split_k_slices=slices), expected[kind],
                                           rtol=0, atol=0, msg=lambda m: f"{kind}, {slices} slices: {m}")


@pytest.mark.gpu
def test_exported_conv2d_refuses_what_its_kernel_cannot_read(exported_convs):
    torch, modules = exported_convs
    mod = modules["fprop", 80]
    x, w = conv_integers(torch, (2, 16, 8, 8), 4), conv_integers(torch, (24, 16, 3, 3), 5)
    cases = [((x.contiguous(), w), "channels_last"),
             ((x.float(), w), "A \\(input\\) has dtype Float but the kernel was built for Half"),
             ((x, conv_integers(torch, (24, 8, 3, 3), 6)), "groups = 1"),
             ((conv_integers(torch, (2, 12, 8, 8), 7), conv_integers(torch, (24, 12, 3, 3), 8)), "multiples of 8"),
             ((x, w, conv_integers(torch, (2, 24, 8, 8), 9)), r"C has shape \[2, 24, 8, 8\] but the output is"),
             ((x, conv_integers(torch, (24, 16, 11, 11), 10)), "larger than the padded input"),
             ((x, w, None, 1, 0, 1, 1.0, 0.0, "serial", 0), "split_k_slices is 0"),
             ((x.cpu(), w.cpu()), "A is on cpu; the kernel runs on CUDA tensors")]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            mod.run(*args)
