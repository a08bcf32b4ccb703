// testing/walkthrough.hpp: the basic GEMM walk-through of examples/basic_gemm.cpp, which `gemmkit demo` runs.
#pragma once

// Plans, compiles, runs and checks as the reference's walk-through does; prints text, or one JSON object. Returns
// the process exit status (0 when every result was exact).
int basic_gemm_walkthrough(bool json);
