"""tests/python/test_tuning.py: plan.tune and the tuning database from Python. Unit: where the database lives and
what tune() refuses; gpu: tune() stores its winner and a new plan's run() uses it (counted)."""
import numpy as np
import pytest

import gemmkit


def f16_plan():
    return gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32, cc=90)


def test_database_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMMKIT_TUNING_DB", str(tmp_path / "t.sqlite3"))
    assert gemmkit.tuning_database_path() == str(tmp_path / "t.sqlite3")
    monkeypatch.setenv("GEMMKIT_TUNING_DB", "off")
    assert gemmkit.tuning_database_path() == ""
    monkeypatch.delenv("GEMMKIT_TUNING_DB")
    monkeypatch.setenv("GEMMKIT_CACHE_DIR", str(tmp_path))
    assert gemmkit.tuning_database_path() == str(tmp_path / "tuning.sqlite3")


def test_tune_refuses_host_arrays_and_bad_options():
    a = np.zeros((64, 64), dtype=np.float16)
    with pytest.raises(gemmkit.TensorError, match="device tensors"):
        f16_plan().tune(a, a, None, a)
    with pytest.raises(gemmkit.ConfigError, match="max_candidates"):
        f16_plan().tune(a, a, None, a, max_candidates=0)


@pytest.mark.gpu
def test_tune_stores_the_winner_and_a_new_plan_uses_it(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    if gemmkit.device_cc() < 90:
        pytest.skip("the tuning case uses SM90 kernels")
    monkeypatch.setenv("GEMMKIT_TUNING_DB", str(tmp_path / "tuning.sqlite3"))
    # 1024^3 (the C++ tuning tier's shape): 256x512x4096 is a parallel split-K shape, which tune() refuses.
    A = torch.randint(-2, 3, (1024, 1024), device="cuda").half()
    B = torch.randint(-2, 3, (1024, 1024), device="cuda").half()
    D = torch.zeros(1024, 1024, dtype=torch.float16, device="cuda")
    plan = gemmkit.Gemm(element=torch.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=torch.float32)
    result = plan.tune(A, B, None, D, max_candidates=2)
    assert result["stored"] and result["database"] == str(tmp_path / "tuning.sqlite3")
    assert [c["ok"] for c in result["candidates"]] == [True, True], result
    assert result["best_ms"] <= result["heuristic_ms"]

    applied = gemmkit.tuning_counters()[0]
    fresh = gemmkit.Gemm(element=torch.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=torch.float32)
    assert fresh.spec_for(A, B, None, D).name() == result["best"]
    D.zero_()
    fresh.run(A, B, None, D)
    assert gemmkit.tuning_counters()[0] >= applied + 2
    assert torch.equal(D, (A.float() @ B.float()).half())
