#!/usr/bin/env bash
# scripts/setup.sh: idempotent set-up — CUTLASS 4.2 headers into .deps/cutlass, nlohmann-json and CLI11 (Debian
# packages, their headers also copied into .deps/include), nanobind, numpy and pytest into the active Python (or into
# the project venv .venv/ when that Python is externally managed), then a CMake build in build/ of what a user runs:
# the library, the CLI (build/gemmkit) and the Python module; with --all (scripts/test.sh), every target: the tests,
# examples and benchmark too, and CLI11 2.5's headers (.deps/cli11-2.5) for the test that builds the CLI against them.
# One line per stage; the build's output goes to build/setup.log, its tail shown on failure.
#   scripts/setup.sh [--all]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
python=
all=
newer_cli11=()  # with --all: -DGEMMKIT_NEWER_CLI11_INCLUDE=DIR, DIR empty when no newer CLI11 could be had
case "${1:-}" in
  "") targets=(gemmkit gemmkit_cli _gemmkit) what="the library, CLI and Python module (3 targets)" ;;
  --all) targets=(all) what="every target (library, CLI, Python module, tests, examples, benchmark)" all=1 ;;
  *) echo "usage: scripts/setup.sh [--all]  (--all: the tests, examples and benchmark too)" >&2; exit 2 ;;
esac

fetch_cutlass() {
  # The CUTLASS C++ headers only (include/, tools/util/include, the licence) of the nvidia-cutlass wheel, checked
  # against its SHA-256; no Python code is installed. The same script serves `pip install .` from a fresh clone.
  cmake -DDEST="$deps/cutlass" -DPYTHON="$python" -P "$root/cmake/fetch_cutlass.cmake"
}

choose_python() {
  # The active python3, unless it lacks a tool and is externally managed (PEP 668: Debian's /usr/bin/python3 refuses
  # pip installs): then a project venv in .venv/, made once and reused.
  local active; active=$(command -v python3) || { echo "gemmkit setup: python3 not found; install python3" >&2; exit 1; }
  local stdlib; stdlib=$("$active" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
  if [[ ! -f "$stdlib/EXTERNALLY-MANAGED" ]] || has_python_tools "$active"; then python=$active; return; fi
  if [[ ! -x "$root/.venv/bin/python" ]]; then
    echo "gemmkit setup: $active is externally managed (PEP 668); creating the project venv $root/.venv"
    if ! "$active" -m venv "$root/.venv"; then
      local version; version=$("$active" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
      rm -rf "$root/.venv"
      echo "gemmkit setup: '$active -m venv' failed; install the venv module (apt-get install python$version-venv)," \
           "or activate a Python of your own, then run this again" >&2
      exit 1
    fi
  fi
  python=$root/.venv/bin/python
  echo "gemmkit setup: using $python"
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

fetch_newer_cli11() {
  # CLI11 2.5's headers (Debian's libcli11-dev, checked against its SHA-256) for the compile-tier test cli_newer_cli11,
  # which builds the CLI against them as well as against the system's older CLI11. Fetched once; an include folder in
  # GEMMKIT_NEWER_CLI11_INCLUDE is used instead. Without the network the test reports itself skipped.
  local dir="$deps/cli11-2.5" deb=libcli11-dev_2.5.0+ds-1_all.deb
  local url="http://deb.debian.org/debian/pool/main/c/cli11/$deb"
  local sha=702c6a046a7413bfce8768e55bb91504ddb1f339fae76f415c701ec320a3c047
  if [[ -n "${GEMMKIT_NEWER_CLI11_INCLUDE:-}" ]]; then
    newer_cli11=(-DGEMMKIT_NEWER_CLI11_INCLUDE="$GEMMKIT_NEWER_CLI11_INCLUDE")
    echo "gemmkit setup: newer CLI11 from GEMMKIT_NEWER_CLI11_INCLUDE=$GEMMKIT_NEWER_CLI11_INCLUDE"
    return
  fi
  if [[ ! -f "$dir/include/CLI/CLI.hpp" ]]; then
    rm -rf "$dir.partial" && mkdir -p "$dir.partial"
    if ! (cd "$dir.partial" && curl -fsS --connect-timeout 10 --max-time 120 -o "$deb" "$url" 2>/dev/null &&
          echo "$sha  $deb" | sha256sum -c --status && cmake -E tar xf "$deb" data.tar.xz &&
          cmake -E tar xf data.tar.xz ./usr/include/CLI ./usr/share/doc/libcli11-dev/copyright &&
          mv usr/include include && mv usr/share/doc/libcli11-dev/copyright . && rm -rf usr "$deb" data.tar.xz); then
      rm -rf "$dir.partial"
      newer_cli11=(-DGEMMKIT_NEWER_CLI11_INCLUDE=)
      echo "gemmkit setup: could not fetch CLI11 2.5 ($url: offline, gone, or not the expected SHA-256); the test" \
           "cli_newer_cli11 will report itself skipped"
      return
    fi
    rm -rf "$dir" && mv "$dir.partial" "$dir"
  fi
  newer_cli11=(-DGEMMKIT_NEWER_CLI11_INCLUDE="$dir/include")
  echo "gemmkit setup: CLI11 2.5 headers ok (.deps/cli11-2.5, for the test cli_newer_cli11)"
}

has_python_tools() { "$1" -c 'import nanobind, numpy, pytest' 2>/dev/null; }

python_tools() {
  # The Python package's build and test tools (nanobind, numpy, pytest) into the chosen Python, unless it has them
  # (then no network is needed). A pip failure stops the set-up with pip's own message.
  has_python_tools "$python" && return
  PIP_ROOT_USER_ACTION=ignore "$python" -m pip install -q --disable-pip-version-check nanobind numpy pytest
}

run_logged() {
  # Runs a command with its output added to build/setup.log; on a failure, the log's tail and where the whole log is.
  local log="$root/build/setup.log"
  if "$@" >>"$log" 2>&1; then return; fi
  echo "gemmkit setup: '$*' failed; the last lines of $log:" >&2
  tail -n 40 "$log" >&2
  echo "gemmkit setup: the full log is $log" >&2
  exit 1
}

build() {
  local generator=() first=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  # A new build/ compiles in batches (GEMMKIT_UNITY_BUILD, ~35% less CPU from scratch); an existing one keeps its
  # generator and its setting (cmake -B build -DGEMMKIT_UNITY_BUILD=OFF for file-by-file incremental rebuilds).
  if [[ -f "$root/build/CMakeCache.txt" ]]; then generator=(); else first=(-DGEMMKIT_UNITY_BUILD=ON); fi
  mkdir -p "$root/build" && : >"$root/build/setup.log"
  run_logged cmake -S "$root" -B "$root/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGEMMKIT_BUILD_PYTHON=ON \
        "${first[@]}" "${newer_cli11[@]}" -DPython_EXECUTABLE="$("$python" -c 'import sys; print(sys.executable)')"
  echo "gemmkit setup: building $what with $(nproc) jobs..."
  local start=$SECONDS
  run_logged cmake --build "$root/build" -j "$(nproc)" --target "${targets[@]}"
  if grep -q 'no work to do' "$root/build/setup.log"; then
    echo "gemmkit setup: already up to date in build/"
  else
    echo "gemmkit setup: built in $((SECONDS - start)) s (build/setup.log)"
  fi
}

check_toolchain
choose_python
if [[ -z "${CUTLASS_PATH:-}" ]]; then
  fetch_cutlass
  echo "gemmkit setup: CUTLASS 4.2 headers ok (.deps/cutlass)"
else
  echo "gemmkit setup: CUTLASS headers from CUTLASS_PATH=$CUTLASS_PATH"
fi
header_packages
if [[ -n "$all" ]]; then fetch_newer_cli11; fi
python_tools
echo "gemmkit setup: nlohmann-json, CLI11, nanobind, numpy and pytest ok"
build
