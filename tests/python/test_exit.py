"""tests/python/test_exit.py: an interpreter that used gemmkit exits cleanly: nanobind reports no leaked instances,
types or functions on stderr (each case in a fresh interpreter)."""
import subprocess
import sys
import textwrap

import pytest

import gemmkit


def stderr_of(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_plans_specs_and_sources_leak_nothing_at_exit():
    err = stderr_of("""
        import numpy as np, gemmkit
        plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, cc=90)
        tiles = plan.tile_descriptions()
        spec = plan.construct(tiles[1])
        source = gemmkit.render(spec)
        grouped = gemmkit.GroupedGemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, cc=90)
        conv = gemmkit.Conv2dFprop(element=np.float16, cc=90)
        keep = [plan, tiles, spec, source, grouped, conv, tiles[0].math_instruction]
    """)
    assert "leaked" not in err, err


@pytest.mark.gpu
def test_torch_custom_ops_leak_nothing_at_exit():
    pytest.importorskip("torch")
    err = stderr_of("""
        import torch, gemmkit.torch
        a = torch.randint(-2, 3, (256, 128), device="cuda", dtype=torch.float16)
        b = torch.randint(-2, 3, (128, 64), device="cuda", dtype=torch.float16)
        assert torch.equal(gemmkit.torch.gemm(a, b), a @ b)
        outs = gemmkit.torch.grouped_gemm([a, a[:64]], [b, b])
        assert torch.equal(outs[1], a[:64] @ b)
        torch.cuda.synchronize()
    """)
    assert "leaked" not in err, err
