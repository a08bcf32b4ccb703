"""tests/python/test_compile.py (compile tier): a kernel really built by nvcc through the Python package, then
found in the on-disk cache by a second process. Needs nvcc and the CUTLASS headers, no GPU."""
import json

import pytest

from isolated import run_isolated

pytestmark = pytest.mark.compile

COMPILE_ONCE = """
    import json, os, numpy as np, gemmkit
    plan = gemmkit.Gemm(element=np.float16, layout="row", element_accumulator=np.float32, cc=80)
    kernel = plan.compile()
    print(json.dumps({"name": kernel.kernel_name, "hit": kernel.cache_hit, "key": kernel.cache_key,
                      "module": os.path.isfile(kernel.module_path), "builds": gemmkit.cache_counters().builds}))
"""


def test_compile_builds_once_and_a_fresh_process_hits(tmp_path):
    first = json.loads(run_isolated(COMPILE_ONCE, timeout=600, GEMMKIT_CACHE_DIR=str(tmp_path)))
    assert first["name"] == "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8"
    assert (first["hit"], first["module"], first["builds"]) == (False, True, 1)
    second = json.loads(run_isolated(COMPILE_ONCE, timeout=600, GEMMKIT_CACHE_DIR=str(tmp_path)))
    assert (second["hit"], second["module"], second["builds"], second["key"]) == (True, True, 0, first["key"])
