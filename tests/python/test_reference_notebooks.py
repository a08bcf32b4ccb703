"""tests/python/test_reference_notebooks.py: the CUTLASS Python interface's own notebooks 00-04 run on gemmkit with
their own assertions, unchanged but for the module they import: `cutlass_cppgen` (and the helper modules they
reach into) is an alias of gemmkit. The notebooks are read at test time from the nvidia-cutlass 4.2.0.0 wheel
(GEMMKIT_CUTLASS_WHEEL, else .deps/ of the clone); none of the reference's files is part of gemmkit.

Each notebook runs twice in one process: first with run(), compile() and emit.pytorch() recording the kernels they
would use instead of running (so that gemmkit.compile_many builds them all in parallel), then for real. With
GEMMKIT_NOTEBOOK_AS_USER=1 it runs once, as a user would (every kernel built when a cell needs it), and prints how
long it took and how many kernels it built: pointed at an empty GEMMKIT_CACHE_DIR, that is the cold first run.
GPU tier."""
from __future__ import annotations

import json
import linecache
import os
import pathlib
import sys
import time
import types
import zipfile

import pytest

import gemmkit

ROOT = pathlib.Path(__file__).resolve().parents[2]
WHEEL = "nvidia_cutlass-4.2.0.0-py3-none-any.whl"
NOTEBOOKS = ["00_basic_gemm", "01_epilogue", "02_pytorch_extension_grouped_gemm", "03_basic_conv2d",
             "04_epilogue_visitor"]
# Cells where gemmkit refuses on purpose what the reference accepts, by a text the cell holds: 00's FP8 cell declares
# C f32 and D e4m3 column-major, then passes an e4m3 C and row-major tensors, which the reference reinterprets
# without a word (its type check "transposes" a mismatched torch tensor and goes on); gemmkit raises an Error (an FP8
# D is not written yet; a C of another type than the plan's is refused). Such a cell must raise a gemmkit.Error.
REFUSED = {"00_basic_gemm": "element=torch.float8_e4m3fn, element_C=torch.float32"}


def wheel() -> pathlib.Path:
    return pathlib.Path(os.environ.get("GEMMKIT_CUTLASS_WHEEL", ROOT / ".deps" / WHEEL))


def code_cells(name: str) -> list[str]:
    """The notebook's code cells, without its shell lines (`!nvidia-smi`, `!pip install`)."""
    with zipfile.ZipFile(wheel()) as archive:
        notebook = json.loads(archive.read(f"cutlass_library/source/examples/python/deprecated/{name}.ipynb"))
    cells = []
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            lines = [line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith("!")]
            cells.append("\n".join(lines))
    return cells


def alias_modules() -> dict[str, types.ModuleType]:
    """cutlass_cppgen as gemmkit (04 imports from its epilogue and utils.profiler submodules), with the helper the
    notebooks import from the reference's backend."""
    device = types.ModuleType("cutlass_cppgen.backend.utils.device")
    device.device_cc = gemmkit.device_cc  # type: ignore[attr-defined]
    modules = {"cutlass_cppgen": gemmkit, "cutlass_cppgen.backend.utils.device": device,
               "cutlass_cppgen.epilogue": gemmkit.epilogue, "cutlass_cppgen.utils": gemmkit.utils,
               "cutlass_cppgen.utils.profiler": gemmkit.utils.profiler}
    for parent in ("cutlass_cppgen.backend", "cutlass_cppgen.backend.utils"):
        modules[parent] = types.ModuleType(parent)
    return modules


def run_cells(cells: list[str], keep_going: bool, refused: str = "") -> None:
    """Runs the cells in one namespace, as a notebook kernel does. keep_going: a failing cell does not stop the rest
    (the recording pass, whose outputs are never computed). A cell holding `refused` must raise a gemmkit.Error."""
    namespace: dict[str, object] = {"__name__": "__notebook__"}
    for index, cell in enumerate(cells):
        # As a notebook kernel does, the cell's text is where inspect.getsource finds the functions it defines
        # (04 traces one: gemmkit.epilogue.trace reads its source).
        filename = f"<cell {index}>"
        linecache.cache[filename] = (len(cell), None, cell.splitlines(keepends=True), filename)
        try:
            exec(compile(cell, filename, "exec"), namespace)
        except SystemExit:  # the notebooks leave early this way when an optional package is missing
            return
        except gemmkit.Error:
            if not (keep_going or (refused and refused in cell)):
                raise
            continue
        except Exception:
            if not keep_going:
                raise
        if not keep_going and refused and refused in cell:
            raise AssertionError(f"cell {index} ran, but gemmkit refuses it on purpose (see REFUSED)")


class Recorder:
    """Stands in for run(), compile() and emit.pytorch(): each records the kernels it would use."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.specs: list[gemmkit.KernelSpec] = []
        op = gemmkit.op
        record = self.specs.append

        def gemm_run(plan, A=None, B=None, C=None, D=None, alpha=None, beta=None, **_):  # noqa: ANN001
            record(plan.spec_for(A, B, C, D, 0.0 if beta is None else beta))

        def grouped_run(plan, *_, **__):  # noqa: ANN001
            record(plan.construct())

        def conv_run(plan, A=None, B=None, C=None, D=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),  # noqa
                     alpha=None, beta=None, split_k=None, **_):
            if split_k is not None:
                plan.set_split_k(split_k[0], int(split_k[1]))
            record(plan.spec_for(A, B, C, D, stride, padding, dilation, 0.0 if beta is None else beta))

        def compile_(plan, tile_description=None, print_module=False):  # noqa: ANN001
            record(plan.construct(tile_description))

        def pytorch(op_, *_, **__):  # noqa: ANN001
            record(op_)

        monkeypatch.setattr(op.Gemm, "run", gemm_run)
        monkeypatch.setattr(op.GroupedGemm, "run", grouped_run)
        monkeypatch.setattr(op.Conv2d, "run", conv_run)
        for plan in (op.Gemm, op.GroupedGemm, op.Conv2d):
            monkeypatch.setattr(plan, "compile", compile_)
        monkeypatch.setattr(gemmkit.emit, "pytorch", pytorch)


@pytest.mark.gpu
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_reference_notebook_runs_unchanged(name, monkeypatch, tmp_path):
    if not wheel().is_file():
        pytest.skip(f"the nvidia-cutlass 4.2.0.0 wheel is not at {wheel()} (set GEMMKIT_CUTLASS_WHEEL to it)")
    pytest.importorskip("torch")
    cells = code_cells(name)
    monkeypatch.chdir(tmp_path)  # 02 writes its extension's sources into the working directory
    for module_name, module in alias_modules().items():
        monkeypatch.setitem(sys.modules, module_name, module)
    unique: dict[str, gemmkit.KernelSpec] = {}
    if os.environ.get("GEMMKIT_NOTEBOOK_AS_USER") != "1":
        with monkeypatch.context() as recording:
            recorder = Recorder(recording)
            run_cells(cells, keep_going=True)
        unique = {spec.canonical(): spec for spec in recorder.specs}
        gemmkit.compile_many(list(unique.values()))
    before, start = gemmkit.cache_counters(), time.perf_counter()
    run_cells(cells, keep_going=False, refused=REFUSED.get(name, ""))
    seconds, after = time.perf_counter() - start, gemmkit.cache_counters()
    print(f"{name}: {len(unique)} kernels prebuilt; {after.builds - before.builds} built while the notebook ran "
          f"({after.background_builds - before.background_builds} of them in the background); "
          f"its cells took {seconds:.1f} s")
