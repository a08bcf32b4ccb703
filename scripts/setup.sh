#!/usr/bin/env bash
# scripts/setup.sh: idempotent set-up — CUTLASS 4.2 headers into .deps/cutlass, then a CMake build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
cutlass_version=4.2.0.0

fetch_cutlass() {
  local dest="$deps/cutlass"
  if [[ -f "$dest/.version" && "$(cat "$dest/.version")" == "$cutlass_version" ]]; then return; fi
  echo "gemmkit setup: fetching CUTLASS $cutlass_version C++ headers (nvidia-cutlass package, no dependencies)"
  local tmp; tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-cutlass==$cutlass_version"
  local wheel; wheel=$(ls "$tmp"/nvidia_cutlass-*.whl)
  (cd "$tmp" && python3 -m zipfile -e "$wheel" x >/dev/null 2>&1 || unzip -q "$wheel" -d x)
  rm -rf "$dest.partial" && mkdir -p "$dest.partial/tools/util"
  mv "$tmp/x/cutlass_library/source/include" "$dest.partial/include"
  mv "$tmp/x/cutlass_library/source/tools/util/include" "$dest.partial/tools/util/include"
  echo "$cutlass_version" > "$dest.partial/.version"
  rm -rf "$dest" && mv "$dest.partial" "$dest"
  rm -rf "$tmp"
}

check_toolchain() {
  command -v cmake >/dev/null || { echo "gemmkit setup: cmake not found; install it (apt-get install cmake)" >&2; exit 1; }
  if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
    echo "gemmkit setup: nvcc not found; install the CUDA toolkit >= 12.4 or put its bin/ on PATH" >&2; exit 1
  fi
}

python_tools() {
  # The Python package (nanobind extension) and its unit tests; quick when already installed.
  python3 -m pip install -q --disable-pip-version-check nanobind numpy pytest 2>&1 | grep -v "^WARNING: Running pip" || true
}

build() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  [[ -f "$root/build/CMakeCache.txt" ]] && generator=()  # keep the generator the folder was made with
  cmake -S "$root" -B "$root/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGEMMKIT_BUILD_PYTHON=ON \
        -DPython_EXECUTABLE="$(python3 -c 'import sys; print(sys.executable)')" >/dev/null
  cmake --build "$root/build" -j "$(nproc)"
}

check_toolchain
if [[ -z "${CUTLASS_PATH:-}" ]]; then fetch_cutlass; fi
python_tools
build
