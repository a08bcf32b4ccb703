// verify/walkthrough.hpp: the basic GEMM walk-through of examples/basic_gemm.cpp, which `gemmkit demo` runs.
#pragma once

#include <optional>

// Plans, compiles, runs and checks as the reference's walk-through does; prints text, or one JSON object. Returns
// the process exit status (0 when every result was exact). `cc` plans for that GPU generation (by default the
// current GPU's, or 90 when none is visible); without a GPU it stops after compiling, and says so.
int basic_gemm_walkthrough(bool json, std::optional<int> cc = std::nullopt);
