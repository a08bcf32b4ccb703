#!/usr/bin/env bash
# scripts/setup.sh: idempotent set-up — CUTLASS 4.2 headers into .deps/cutlass, nlohmann-json and CLI11 (Debian
# packages, their headers also copied into .deps/include), then a CMake build.
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

header_packages() {
  # Header-only libraries from Debian. Their copies in .deps/include build on a machine without the packages and
  # without a network (the GPU machine builds from a carried .deps/); CMake prefers the system packages.
  local packages=(nlohmann-json3-dev libcli11-dev) headers=(nlohmann/json.hpp CLI/CLI.hpp) missing=() i
  for i in "${!packages[@]}"; do [[ -f "/usr/include/${headers[$i]}" ]] || missing+=("${packages[$i]}"); done
  if ((${#missing[@]})); then
    if [[ -f "$deps/include/nlohmann/json.hpp" && -f "$deps/include/CLI/CLI.hpp" ]]; then
      echo "gemmkit setup: ${missing[*]} not installed; using the headers in .deps/include"
      return
    fi
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
      echo "gemmkit setup: install ${missing[*]} (e.g. sudo apt-get install ${missing[*]}), then run this again" >&2
      exit 1
    fi
    echo "gemmkit setup: installing ${missing[*]}"
    apt-get install -y -q "${missing[@]}" >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
  fi
  mkdir -p "$deps/include"
  for dir in nlohmann CLI; do rm -rf "$deps/include/$dir" && cp -r "/usr/include/$dir" "$deps/include/$dir"; done
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
header_packages
python_tools
build
