#!/usr/bin/env bash
# tests/package/wheel.sh SOURCE PYTHON (compile tier): the self-contained pip package. Builds a wheel of SOURCE with
# `pip wheel` (build isolation: pip fetches scikit-build-core and nanobind), installs it into a fresh venv, and from
# a folder outside the source tree, with CUTLASS_PATH and GEMMKIT_ROOT unset, runs the `gemmkit` console script
# (`plan --cc 90`) and a Python Gemm(...).compile() (nvcc; the kernel may come from the shared cache). Both must use
# the headers inside the installed package.
set -euo pipefail
source=$1 python=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$python" -m pip wheel -q --no-deps -w "$tmp/dist" "$source"
wheel=$(ls "$tmp"/dist/gemmkit-*.whl)
"$python" -m zipfile -l "$wheel" >"$tmp/contents"
for f in gemmkit/bin/gemmkit gemmkit/libgemmkit.so gemmkit/device/include/gemmkit/abi.h \
         gemmkit/cutlass/include/cutlass/version.h gemmkit/_cli.py gemmkit/__init__.py gemmkit/py.typed \
         gemmkit/_gemmkit.pyi gemmkit/emit/templates/setup.py.in; do
  grep -q "^$f " "$tmp/contents" || fail "$f is not in $(basename "$wheel")"
done

# A fresh venv; the system site only spares a download of numpy where the base Python has it.
"$python" -m venv --system-site-packages "$tmp/venv"
PIP_ROOT_USER_ACTION=ignore "$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')

cd "$tmp"
unset CUTLASS_PATH GEMMKIT_ROOT
plan=$("$tmp/venv/bin/gemmkit" plan --cc 90 --element f16 --element-accumulator f32 --layout row --json)
echo "$plan"
grep -q '"kernel_name": *"cutlass3x_sm90_tensorop_s0x0x0gemm_f16_f16_f32_f16_f16_' <<<"$plan" ||
  fail "gemmkit plan printed no SM90 kernel"
version=$("$tmp/venv/bin/gemmkit" --version)
grep -q "0\.1\." <<<"$version" || fail "gemmkit --version: $version"

"$tmp/venv/bin/python" - "$site" <<'PY'
import sys, numpy as np, gemmkit
site = sys.argv[1]
assert gemmkit.__file__.startswith(site), gemmkit.__file__
headers = gemmkit._gemmkit.Toolchain.find_headers()
assert headers.cutlass_root == f"{site}/gemmkit/cutlass", headers.cutlass_root
assert headers.device_include_dir == f"{site}/gemmkit/device/include", headers.device_include_dir
plan = gemmkit.Gemm(element=np.float16, layout=gemmkit.LayoutType.RowMajor, element_accumulator=np.float32, cc=80)
kernel = plan.compile()
print(kernel.kernel_name, "cache hit" if kernel.cache_hit else "built", kernel.module_path)
assert kernel.kernel_name == "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8", kernel.kernel_name
PY
echo "PASS"
