// examples/cc_option.hpp: the examples' one option, `--cc N`: plan and compile for SM N (no GPU needed to get that
// far).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

// The N of `--cc N` (or `--cc=N`), or nullopt; anything else on the command line is a usage error (exit 2).
inline std::optional<int> cc_option(int argc, char** argv) {
  const auto usage = [&] {
    std::fprintf(stderr, "usage: %s [--cc N]   (N: the compute capability to plan and compile for, e.g. 90)\n",
                 argv[0]);
    std::exit(2);
  };
  std::string value;
  if (argc == 3 && std::string(argv[1]) == "--cc") {
    value = argv[2];
  } else if (argc == 2 && std::string(argv[1]).rfind("--cc=", 0) == 0) {
    value = std::string(argv[1]).substr(5);
  } else if (argc != 1) {
    usage();
  }
  if (value.empty()) return std::nullopt;
  std::size_t used = 0;
  try {
    const int cc = std::stoi(value, &used);
    if (used == value.size() && cc > 0) return cc;
  } catch (const std::exception&) {
  }
  usage();
  return std::nullopt;
}
