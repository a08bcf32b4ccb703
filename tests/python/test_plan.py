"""tests/python/test_plan.py (unit: no nvcc, no GPU): planning through the Python package — kernel names,
enumeration, opclass / activation / swizzle / tile setters, dtype and layout conversions."""
import copy
import inspect
import pydoc
import json
import os
import subprocess

import numpy as np
import pytest

import gemmkit
from gpu_specs import fp16_plan

SM90_DEFAULT = "cutlass3x_sm90_tensorop_s0x0x0gemm_f16_f16_f32_f16_f16_256x256x64_2x1x1_0_ttt_align8"
SM80_DEFAULT = "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8"


def test_kernel_names_match_the_reference():
    plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32,
                        cc=90)
    assert plan.kernel_name() == SM90_DEFAULT
    plan80 = gemmkit.op.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor,
                             element_accumulator=np.float32, cc=80)
    assert plan80.kernel_name() == SM80_DEFAULT
    assert plan.cc == 90 and plan80.cc == 80
    assert plan.construct().name() == SM90_DEFAULT


@pytest.mark.parametrize("element", [np.float16, np.dtype("float16"), "f16", "float16", "half",
                                     gemmkit.DataType.f16])
def test_element_spellings(element):
    plan = gemmkit.Gemm(element=element, layout="row", element_accumulator="f32", cc=90)
    assert plan.kernel_name() == SM90_DEFAULT


class FakeTorchDtype:
    """What gemmkit sees of torch.bfloat16 without torch: a torch-module object printing as torch.<name>."""

    __module__ = "torch"

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


def test_torch_dtypes_without_torch():
    plan = gemmkit.Gemm(element=FakeTorchDtype("bfloat16"), layout="row",
                        element_accumulator=FakeTorchDtype("float32"), cc=90)
    assert plan.element_A == gemmkit.DataType.bf16
    assert plan.element_accumulator == gemmkit.DataType.f32


def test_per_operand_elements_and_layouts():
    plan = gemmkit.Gemm(element_A=np.int8, element_B="s8", element_C=np.int32, element_D=np.int32,
                        element_accumulator=np.int32, layout_A="row", layout_B="col", layout_C="row", cc=80)
    assert (plan.element_A, plan.element_B, plan.element_C) == (gemmkit.DataType.s8,) * 2 + (gemmkit.DataType.s32,)
    assert plan.layout_B == gemmkit.LayoutType.ColumnMajor
    assert plan.opclass == gemmkit.OpcodeClass.TensorOp
    assert plan.kernel_name().startswith("cutlass_tensorop_")


def test_accumulator_defaults_to_element_c():
    plan = gemmkit.Gemm(element=np.float32, layout="row", cc=80)
    assert plan.element_accumulator == gemmkit.DataType.f32


def test_opclass_get_and_set():
    plan = fp16_plan(90)
    assert plan.opclass == gemmkit.OpcodeClass.TensorOp
    assert set(plan.opclasses()) == {gemmkit.OpcodeClass.TensorOp, gemmkit.OpcodeClass.Simt}
    plan.opclass = "simt"
    assert plan.opclass == gemmkit.OpcodeClass.Simt
    assert "simt" in plan.kernel_name()
    plan.opclass = gemmkit.OpcodeClass.TensorOp
    assert plan.kernel_name() == SM90_DEFAULT


def test_tile_descriptions_and_compile_free_construct():
    plan = fp16_plan(90)
    tiles = plan.tile_descriptions()
    assert len(tiles) > 10 and all(isinstance(t, gemmkit.TileDescription) for t in tiles)
    assert len({repr(t) for t in tiles}) == len(tiles)  # no duplicates
    assert "ThreadblockShape" in str(tiles[0])
    # The default's 256x256x64 cluster tile over a 2x1x1 cluster: each CTA computes 128x256x64, and both say so.
    assert "  CTA tile: [128, 256, 64]\n" in str(tiles[0])
    assert "  ThreadblockShape (cluster tile): [256, 256, 64]\n" in str(tiles[0])
    assert repr(tiles[0]).startswith("TileDescription(cluster_shape=[2, 1, 1], cta_tile=[128, 256, 64], "
                                     "threadblock_shape=[256, 256, 64], ")
    assert plan.tile_description is None
    spec = plan.construct(tiles[1])
    assert plan.tile_description == tiles[1]  # construct(td) keeps td in the plan, as the reference does
    assert spec.tile_description == tiles[1]
    assert plan.kernel_name() == spec.name() != SM90_DEFAULT


def test_tile_description_setter_takes_a_dict():
    plan = fp16_plan(80)
    plan.tile_description = {"threadblock_shape": [128, 128, 32], "warp_count": [2, 2, 1], "stages": 3}
    assert plan.tile_description.threadblock_shape == [128, 128, 32]
    assert plan.kernel_name() == "cutlass_tensorop_f16_s16816gemm_f16_128x128_32x3_tt_align8"
    with pytest.raises(gemmkit.ConfigError, match="Unknown TileDescription field"):
        plan.tile_description = {"threadblock": [1, 2, 3]}


def test_tile_description_value_semantics():
    td = gemmkit.TileDescription(threadblock_shape=[128, 128, 64], warp_count=[2, 2, 1], stages=3,
                                 instruction_shape=[16, 8, 16])
    clone = copy.copy(td)
    clone.stages = 4
    assert td.stages == 3 and clone != td
    assert copy.deepcopy(td) == td
    assert td.cta_tile() == [128, 128, 64]


def test_eight_stages_rejected_before_compiling():
    plan = fp16_plan(90)
    too_deep = copy.copy(plan.tile_descriptions()[0])
    too_deep.threadblock_shape = [256 * too_deep.cluster_shape[0], 128 * too_deep.cluster_shape[1], 64]
    too_deep.stages = 8
    too_deep.kernel_schedule = gemmkit.KernelScheduleType.TmaWarpSpecializedCooperative
    too_deep.epilogue_schedule = gemmkit.EpilogueScheduleType.TmaWarpSpecializedCooperative
    with pytest.raises(gemmkit.ConfigError, match="shared memory"):
        plan.compile(too_deep)
    assert plan.tile_description is None  # a rejected tile is not stored


def test_pingpong_kernel_with_cooperative_epilogue_is_refused_when_set():
    # It used to be accepted here and refused only by render_source(): the rule was codegen's alone.
    plan = fp16_plan(90)
    tile = {"threadblock_shape": [128, 128, 64], "cluster_shape": [1, 1, 1],
            "kernel_schedule": gemmkit.KernelScheduleType.TmaWarpSpecializedPingpong,
            "epilogue_schedule": gemmkit.EpilogueScheduleType.TmaWarpSpecializedCooperative}
    with pytest.raises(gemmkit.ConfigError, match="epilogue schedule needs a cooperative kernel schedule"):
        plan.tile_description = tile
    assert plan.tile_description is None
    plan.tile_description = dict(tile, epilogue_schedule=gemmkit.EpilogueScheduleType.TmaWarpSpecialized)
    assert "_warpspecialized_pingpong_epi_tma" in plan.render_source().kernel_name


def test_activations():
    plan = fp16_plan(90)
    names = [a.name for a in plan.activations()]
    assert names[:8] == ["gelu", "hardswish", "identity", "leaky_relu", "relu", "sigmoid", "silu", "tanh"]
    assert set(names) == {a.name for a in gemmkit.epilogue.get_activations()}
    assert plan.activation == gemmkit.epilogue.identity
    plan.activation = gemmkit.epilogue.relu
    assert plan.activation == gemmkit.Activation.relu
    assert plan.kernel_name() == SM90_DEFAULT + "_act_at_launch"
    plan.activation_at_launch = False
    assert plan.kernel_name() == SM90_DEFAULT + "_relu"
    plan.activation = "gelu_tanh"
    assert plan.activation == gemmkit.epilogue.gelu_tanh
    plan.activation = ("leaky_relu", 0.5)
    assert plan.activation == gemmkit.epilogue.leaky_relu and plan.activation_parameter == 0.5
    plan.activation = (gemmkit.epilogue.leaky_relu, 0.25)
    assert plan.activation_parameter == 0.25
    with pytest.raises(gemmkit.ConfigError, match="Invalid activation 'swish'"):
        plan.activation = "swish"


def test_activation_taken_at_launch_shares_one_kernel(monkeypatch):
    monkeypatch.delenv("GEMMKIT_ACTIVATION_AT_LAUNCH", raising=False)
    plan = fp16_plan(90)
    assert plan.activation_at_launch is True  # the default on 16-bit operands
    plan.activation = gemmkit.epilogue.relu
    relu = plan.construct()
    assert relu.activation_at_launch and relu.name() == SM90_DEFAULT + "_act_at_launch"
    plan.activation = ("leaky_relu", 0.5)
    assert plan.construct().name() == relu.name()
    assert plan.construct().activation == gemmkit.Activation.leaky_relu
    plan.activation = gemmkit.epilogue.identity  # the plain linear combination's kernel
    assert plan.kernel_name() == SM90_DEFAULT and not plan.construct().activation_at_launch
    plan80 = fp16_plan(80)
    plan80.activation_at_launch = True
    plan80.activation = gemmkit.epilogue.relu
    assert plan80.kernel_name() == SM80_DEFAULT + "_relu" and not plan80.construct().activation_at_launch
    monkeypatch.setenv("GEMMKIT_ACTIVATION_AT_LAUNCH", "0")
    off = fp16_plan(90)
    off.activation = gemmkit.epilogue.relu
    assert off.activation_at_launch is False and off.kernel_name() == SM90_DEFAULT + "_relu"


def test_swizzling_functors():
    plan = fp16_plan(90)
    assert plan.swizzling_functor == gemmkit.swizzle.IdentitySwizzle1
    assert plan.swizzling_functors() == [gemmkit.swizzle.IdentitySwizzle1,
                                         gemmkit.swizzle.ThreadblockSwizzleStreamK]
    plan.swizzling_functor = gemmkit.swizzle.ThreadblockSwizzleStreamK
    assert "stream_k" in plan.kernel_name()
    plan80 = fp16_plan(80)
    assert len(plan80.swizzling_functors()) == 5  # HorizontalSwizzle does not compile with CUTLASS 4.2
    plan80.swizzling_functor = "IdentitySwizzle4"
    assert plan80.swizzling_functor == gemmkit.swizzle.IdentitySwizzle4
    with pytest.raises(gemmkit.ConfigError, match="HorizontalSwizzle does not compile with CUTLASS 4.2"):
        plan80.swizzling_functor = "HorizontalSwizzle"
    with pytest.raises(gemmkit.ConfigError, match="Invalid swizzling functor 'Zigzag'; available: "
                                                  "IdentitySwizzle1, ThreadblockSwizzleStreamK"):
        plan.swizzling_functor = "Zigzag"
    with pytest.raises(gemmkit.ConfigError, match="^Swizzle IdentitySwizzle2 does not apply to SM90"):
        plan.swizzling_functor = gemmkit.swizzle.IdentitySwizzle2  # the C++ rule, with its message
    assert set(gemmkit.swizzle.get_swizzling_functors()) == set(gemmkit.SwizzlingFunctor)


def test_render_is_pure():
    plan = fp16_plan(80)
    source = plan.render_source()
    assert source.kernel_name == SM80_DEFAULT and source.arch_flag == "sm_80"
    assert gemmkit.render(plan.construct()).text == source.text


def test_module_surface():
    for name in ("Gemm", "LayoutType", "OpcodeClass", "DataType", "TileDescription", "ConfigError", "TensorError",
                 "ToolchainError", "CompileError", "CudaError"):
        assert hasattr(gemmkit, name), name
    assert gemmkit.Gemm is gemmkit.op.Gemm
    assert {"f16", "bf16", "f32", "f64", "s8", "s32"} <= set(gemmkit.DataType.__members__)
    assert gemmkit.LayoutType.RowMajor != gemmkit.LayoutType.ColumnMajor
    assert isinstance(gemmkit.cache_dir(), str)


def test_bias_kernel_cc_and_raster_order():
    plan = gemmkit.Gemm(element=np.float16, layout="row", element_accumulator=np.float32, cc=90, kernel_cc=80)
    assert plan.kernel_cc == 80
    plan.bias = "column"
    assert plan.bias == gemmkit.BiasMode.column
    assert plan.kernel_name() == SM80_DEFAULT + "_biascolumn"
    with pytest.raises(gemmkit.ConfigError, match="Raster order applies to SM90"):
        plan.raster_order = "AlongN"
    plan90 = fp16_plan(90)
    plan90.raster_order = gemmkit.RasterOrder.AlongN
    assert plan90.max_swizzle_size == 0  # run() chooses per problem
    plan90.max_swizzle_size = 2
    assert (plan90.raster_order, plan90.max_swizzle_size) == (gemmkit.RasterOrder.AlongN, 2)
    assert plan90.kernel_name() == SM90_DEFAULT  # run-time arguments: the kernel stays


def test_split_k_settings():
    plan = fp16_plan(90)
    assert (plan.decomposition, plan.split_k_slices) == (gemmkit.Decomposition.Auto, 1)
    plan.set_split_k_slices(4)
    assert (plan.decomposition, plan.split_k_slices) == (gemmkit.Decomposition.SplitK, 4)
    plan.decomposition = "DataParallel"
    assert (plan.decomposition, plan.split_k_slices) == (gemmkit.Decomposition.DataParallel, 1)
    plan.reduction_mode = "Nondeterministic"
    assert plan.reduction_mode == gemmkit.ReductionMode.Nondeterministic
    assert plan.kernel_name() == SM90_DEFAULT  # run-time arguments: the kernel stays
    with pytest.raises(gemmkit.ConfigError, match="set_split_k_slices"):
        plan.decomposition = "SplitK"
    with pytest.raises(gemmkit.ConfigError, match="split_k_slices must be"):
        plan.set_split_k_slices(0)
    sm80 = gemmkit.Gemm(element=np.float16, layout="row", element_accumulator=np.float32, cc=90, kernel_cc=80)
    with pytest.raises(gemmkit.ConfigError, match="CUTLASS 2.x"):
        sm80.set_split_k_slices(2)


# The gemmkit command line and the Python package resolve types and layouts through the same C++ code: for each
# option set, `gemmkit plan --json` and the Python plan agree (the CLI's help: --element f16 and --layout row when
# a line names neither).
@pytest.mark.skipif("GEMMKIT_CLI" not in os.environ, reason="needs GEMMKIT_CLI, the gemmkit binary (ctest sets it)")
@pytest.mark.parametrize("line, kwargs", [
    ("", dict(element="f16", layout="row")),
    ("--element bf16 --element-accumulator f32", dict(element="bf16", layout="row", element_accumulator="f32")),
    ("--element f32 --layout col", dict(element="f32", layout="col")),
    ("--element-c f32 --element-d f32 --layout-b col",
     dict(element="f16", layout="row", element_C="f32", element_D="f32", layout_B="col")),
])
def test_the_cli_resolves_types_as_python_does(line, kwargs):
    out = subprocess.run([os.environ["GEMMKIT_CLI"], "plan", "--cc", "90", "--json", *line.split()],
                         capture_output=True, text=True, check=True).stdout
    cli = json.loads(out)
    plan = gemmkit.Gemm(cc=90, **kwargs)
    for field in ["element_A", "element_B", "element_C", "element_D", "element_accumulator", "layout_A", "layout_B",
                  "layout_C"]:
        assert cli[field.lower()] == getattr(plan, field).name, (line, field)
    assert cli["kernel_name"] == plan.kernel_name()


def test_packs_resolve_without_a_gpu(tmp_path):
    defaults = gemmkit.pack_specs("defaults")
    assert {s.cc for s in defaults} == {80, 90}
    pack = tmp_path / "app.pack"
    pack.write_text("# one kernel\n--cc 90 --element f16 --element-accumulator f32 --layout row\n")
    (spec,) = gemmkit.read_pack_file(str(pack))
    assert spec.name() == SM90_DEFAULT
    with pytest.raises(gemmkit.ConfigError, match="unknown kernel pack 'nope'"):
        gemmkit.compile_many("nope")  # refused before any compile
    with pytest.raises(gemmkit.ConfigError, match="line 1"):
        pack.write_text("--cc 90 --elemnt f16\n")
        gemmkit.read_pack_file(str(pack))


def test_the_pack_path_comes_before_the_installed_packs(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("GEMMKIT_PACK_PATH", f"{first}:{second}")
    dirs = gemmkit.pack_dirs()
    assert dirs[:2] == [str(first), str(second)]
    assert all(os.path.basename(os.path.dirname(d)) == "packs" for d in dirs[2:]), dirs


def test_help_on_the_plans_reads_cleanly():
    """help(gemmkit.Gemm) shows the Python plan's documented API: no nanobind objects, no instance-dict entries, and
    every public method and property documented."""
    for cls in (gemmkit.Gemm, gemmkit.GroupedGemm):
        text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
        for noise in ("nanobind", "nb_func", "nb_type", "__dict__", "__weakref__", "See help(type(self))"):
            assert noise not in text, f"{cls.__name__}: {noise!r} in help():\n{text}"
        for name in ("run", "compile", "construct", "opclass", "activation", "tile_description", "activations"):
            assert getattr(cls, name).__doc__, f"{cls.__name__}.{name} has no docstring"


@pytest.mark.parametrize("cls, first", [(gemmkit.Gemm, "A"), (gemmkit.GroupedGemm, "A"), (gemmkit.Conv2d, "kind"),
                                        (gemmkit.Conv2dFprop, "input"), (gemmkit.Conv2dDgrad, "grad_output"),
                                        (gemmkit.Conv2dWgrad, "grad_output")])
def test_help_shows_the_constructors_arguments(cls, first):
    parameters = inspect.signature(cls).parameters
    assert list(parameters)[0] == first
    assert {"element", "element_accumulator", "element_A", "cc", "kernel_cc"} <= set(parameters)
    if not issubclass(cls, gemmkit.Conv2d):
        assert {"layout", "layout_A"} <= set(parameters)
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    assert "*args" not in text and "**kwargs" not in text, text[:2000]
    assert f"{cls.__name__}({first}: " in text  # the header line is the constructor's


def test_conv_subclasses_take_the_element_arguments_by_keyword():
    plan = gemmkit.Conv2dDgrad(element="f16", element_accumulator="f32", cc=90)
    assert plan.kind == gemmkit.ConvKind.dgrad and plan.element_accumulator == gemmkit.DataType.f32
    with pytest.raises(TypeError):
        gemmkit.Conv2dFprop(None, None, None, None, 1.0, 0.0, "f16")  # element is keyword-only, as before


def test_plan_reprs_name_kind_types_layouts_and_kernel():
    counters = gemmkit.cache_counters()
    plan = gemmkit.Gemm(element="f16", layout="row", element_accumulator="f32", cc=90)
    assert repr(plan) == ("Gemm(element=f16, element_accumulator=f32, layout=RowMajor, opclass=TensorOp, cc=90, "
                          f"kernel_cc=90, kernel={SM90_DEFAULT})")
    mixed = gemmkit.Gemm(element_A="f16", element_B="f16", element_C="f32", element_D="f32", layout_A="row",
                         layout_B="col", layout_C="row", element_accumulator="f32", cc=80)
    assert repr(mixed).startswith("Gemm(element_A=f16, element_B=f16, element_C=f32, element_D=f32, "
                                  "element_accumulator=f32, layout_A=RowMajor, layout_B=ColumnMajor, "
                                  "layout_C=RowMajor, opclass=TensorOp, cc=80, kernel_cc=80, kernel=cutlass_")
    grouped = gemmkit.GroupedGemm(element="f16", layout="row", element_accumulator="f32", cc=90)
    assert repr(grouped).startswith("GroupedGemm(element=f16, ") and "gemm_grouped_" in repr(grouped)
    conv = gemmkit.Conv2dWgrad(element="f16", element_accumulator="f32", cc=90)
    assert repr(conv) == ("Conv2dWgrad(kind=wgrad, element=f16, element_accumulator=f32, opclass=TensorOp, cc=90, "
                          f"kernel_cc=90, kernel={conv.kernel_name()})")
    simt = gemmkit.Gemm(element="f32", layout="row", element_accumulator="f32", cc=80)
    simt.opclass = "simt"
    assert "opclass=Simt" in repr(simt) and simt.kernel_name() in repr(simt)
    after = gemmkit.cache_counters()
    assert (after.builds, after.disk_hits) == (counters.builds, counters.disk_hits)  # naming compiles nothing


def test_value_reprs():
    spec = gemmkit.Gemm(element="f16", layout="row", element_accumulator="f32", cc=90).construct()
    assert repr(spec) == f"KernelSpec({SM90_DEFAULT})"
    tile = repr(spec.tile_description)
    assert tile.startswith("TileDescription(") and "threadblock_shape=[256, 256, 64]" in tile
    toolchain = gemmkit._gemmkit.Toolchain.find_headers()
    text = repr(toolchain)
    assert text.startswith("Toolchain(cutlass_root=") and "object at 0x" not in text
    assert f"cutlass_version={toolchain.cutlass_version!r}" in text
    assert f"device_include_dir={toolchain.device_include_dir!r}" in text
    assert "nvcc=" not in text  # find_headers() runs no nvcc: the empty fields are left out


def test_running_kernel_name_is_empty_before_a_run_and_compiles_nothing():
    plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32, cc=90)
    A, B, D = (np.zeros(shape, np.float16) for shape in ((64, 32), (32, 48), (64, 48)))
    before = gemmkit.cache_counters()
    assert plan.running_kernel_name(A, B, None, D) == ""  # nothing loaded yet: run() would build the quick twin
    assert gemmkit.cache_counters().builds == before.builds
    with pytest.raises(gemmkit.TensorError):
        plan.running_kernel_name(A, A, None, D)  # the same checks as run()
