// verify/shape_suite.cpp: the shape suite's groups and shapes (the problems themselves: catalog/suite_shapes.hpp).
#include "verify/shape_suite.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "catalog/suite_shapes.hpp"

namespace gemmkit::verify {
namespace {

std::vector<SuiteShape> group_shapes(const std::string& group) {
  std::vector<SuiteShape> out;
  for (const catalog::SuiteProblem& p : catalog::suite_problems()) {
    if (p.group == group) out.push_back({group, p.m, p.n, p.k});
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
