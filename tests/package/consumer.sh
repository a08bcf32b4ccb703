#!/usr/bin/env bash
# tests/package/consumer.sh BUILD SOURCE: the C++ package (unit tier). Installs BUILD into a temporary prefix, moves
# the prefix (the install must not depend on where it was made, nor on the source tree), builds examples/consumer
# against it with find_package(gemmkit 0.1) and runs it and the installed CLI: both must find the device headers and
# CUTLASS inside the prefix, and CUTLASS_PATH must still win.
set -euo pipefail
build=$1 source=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/made" >/dev/null
[[ ! -e "$tmp/made/gemmkit" ]] || fail "a plain install must not install the Python package layout"
mv "$tmp/made" "$tmp/prefix"
prefix=$tmp/prefix
for f in include/gemmkit/gemm.hpp include/gemmkit/gemmkit.hpp share/gemmkit/device/include/gemmkit/abi.h \
         share/gemmkit/cutlass/include/cutlass/version.h share/gemmkit/templates/sm90_gemm.cu.in bin/gemmkit \
         lib/cmake/gemmkit/gemmkitConfig.cmake lib/cmake/gemmkit/gemmkitConfigVersion.cmake; do
  [[ -e "$prefix/$f" ]] || fail "$f is not installed"
done
ls "$prefix"/lib*/libgemmkit.so >/dev/null || fail "libgemmkit.so is not installed"
# The installed library names no folder of the source tree (it finds its data beside itself).
if grep -aq "$source" "$prefix"/lib*/libgemmkit.so; then
  fail "libgemmkit.so names the source tree: $(grep -ao "$source[^[:cntrl:]]*" "$prefix"/lib*/libgemmkit.so | sort -u | head -3)"
fi

cmake -S "$source/examples/consumer" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" >/dev/null
cmake --build "$tmp/build" >/dev/null
out=$(cd "$tmp" && env -u CUTLASS_PATH -u GEMMKIT_ROOT "$tmp/build/consumer")
echo "$out"
grep -qx "kernel cutlass3x_sm90_tensorop_.*" <<<"$out" || fail "no SM90 kernel name"
grep -qx "cutlass $prefix/share/gemmkit/cutlass (4.2.0)" <<<"$out" || fail "CUTLASS not taken from the prefix"
grep -qx "device_include $prefix/share/gemmkit/device/include" <<<"$out" || fail "device headers not from the prefix"
ln -s "$prefix/share/gemmkit/cutlass" "$tmp/other-cutlass"
override=$(CUTLASS_PATH="$tmp/other-cutlass" "$tmp/build/consumer")
grep -qx "cutlass $tmp/other-cutlass (4.2.0)" <<<"$override" || fail "CUTLASS_PATH does not override: $override"
bad=$(CUTLASS_PATH="$tmp/nowhere" "$tmp/build/consumer" 2>&1) && fail "a bad CUTLASS_PATH must fail"
grep -q "CUTLASS headers not found at $tmp/nowhere (from CUTLASS_PATH)" <<<"$bad" || fail "unclear error: $bad"

# The installed CLI plans the same kernel.
cli=$(env -u CUTLASS_PATH -u GEMMKIT_ROOT "$prefix/bin/gemmkit" plan --cc 90 --element f16 --element-accumulator f32 \
      --layout row)
grep -q "$(sed -n 's/^kernel //p' <<<"$out")" <<<"$cli" || fail "the installed CLI plans another kernel: $cli"

# The version file: 0.1 is accepted above; 0.2 and 1.0 are not.
for version in 0.2 1.0; do
  sed "s/find_package(gemmkit 0.1 REQUIRED)/find_package(gemmkit $version REQUIRED)/" \
    "$source/examples/consumer/CMakeLists.txt" >"$tmp/CMakeLists.txt"
  cp "$source/examples/consumer/main.cpp" "$tmp/main.cpp"
  if cmake -S "$tmp" -B "$tmp/build-$version" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
    fail "find_package(gemmkit $version) accepted version 0.1"
  fi
done
echo "PASS"
