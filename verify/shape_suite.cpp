// verify/shape_suite.cpp: the shape suite's groups and shapes.
#include "verify/shape_suite.hpp"

#include <algorithm>
#include <array>
#include <sstream>
#include <stdexcept>

namespace gemmkit::verify {
namespace {

// Llama-3 8B and 70B projections, N x K: attention out/qkv-sized, MLP up/gate and down, 70B's MLP.
constexpr std::int64_t kProjections[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {28672, 8192}, {8192, 28672}};

std::vector<SuiteShape> group_shapes(const std::string& group) {
  std::vector<SuiteShape> out;
  if (group == "today") {
    for (auto [m, n, k] : {std::array<std::int64_t, 3>{2400, 3232, 4096},
                           {4096, 4096, 4096},
                           {8192, 8192, 8192},
                           {16384, 16384, 16384}}) {
      out.push_back({group, m, n, k});
    }
  } else if (group == "square") {
    for (std::int64_t s : {1024, 2048, 3000, 4096, 6144, 8192, 12288, 16384}) out.push_back({group, s, s, s});
  } else if (group == "long_k") {
    for (auto [m, n, k] : {std::array<std::int64_t, 3>{512, 512, 16384}, {1024, 1024, 32768}, {128, 4096, 16384}}) {
      out.push_back({group, m, n, k});
    }
  } else if (group.rfind("llm", 0) == 0) {
    const std::int64_t m = std::stoll(group.substr(3));
    for (const auto& nk : kProjections) out.push_back({group, m, nk[0], nk[1]});
  } else if (group == "skinny") {
    for (std::int64_t m : {1, 8}) {
      for (const auto& nk : kProjections) out.push_back({group, m, nk[0], nk[1]});
    }
  } else if (group == kOddGroup) {  // the shapes python/bench/odd_shapes.py times against torch.matmul
    for (auto [m, n, k] :
         {std::array<std::int64_t, 3>{777, 1999, 3001}, {1001, 1003, 1005}, {4095, 4097, 4099}, {8191, 8193, 1023}}) {
      out.push_back({group, m, n, k});
    }
  }
  return out;
}

}  // namespace

std::string SuiteShape::text() const {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

const std::vector<std::string>& suite_groups(SuiteGroups which) {
  static const std::vector<std::string> kTensorCore = {"today",  "square",  "long_k",  "llm16",
                                                       "llm128", "llm1024", "llm8192", "skinny"};
  static const std::vector<std::string> kWithOdd = [] {
    std::vector<std::string> groups = kTensorCore;
    groups.emplace_back(kOddGroup);
    return groups;
  }();
  return which == SuiteGroups::WithOdd ? kWithOdd : kTensorCore;
}

std::vector<SuiteShape> shape_suite(const std::string& groups, SuiteGroups which) {
  const auto& known = suite_groups(which);
  std::vector<std::string> wanted;
  std::stringstream stream(groups);
  for (std::string name; std::getline(stream, name, ',');) {
    if (name.empty()) continue;
    if (name == "all") {
      wanted = known;
      break;
    }
    if (name == "llm") {
      for (const char* g : {"llm16", "llm128", "llm1024", "llm8192"}) wanted.push_back(g);
      continue;
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& g : known) list += (list.empty() ? "" : ", ") + g;
      throw std::invalid_argument("unknown suite group '" + name + "'; use " + list + ", llm or all");
    }
    wanted.push_back(name);
  }
  if (wanted.empty()) wanted = known;
  std::vector<SuiteShape> out;
  for (const auto& group : known) {  // suite order, each group once
    if (std::find(wanted.begin(), wanted.end(), group) == wanted.end()) continue;
    for (auto& s : group_shapes(group)) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gemmkit::verify
