#!/usr/bin/env bash
# scripts/test.sh: set up and build every target (tests, examples, benchmark, the public-header checks), then run
# the unit and compile tiers (GEMMKIT_TEST_TIERS=gpu on a GPU machine: docs/development.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" --all
ctest --test-dir "$root/build" -L "${GEMMKIT_TEST_TIERS:-unit|compile}" --output-on-failure -j 2
