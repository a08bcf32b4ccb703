// verify/shape_suite.cpp: the shape suite's groups and shapes (the problems themselves: catalog/suite_shapes.hpp).
#include "verify/shape_suite.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "catalog/suite_shapes.hpp"

namespace gemmkit::verify {

std::string SuiteShape::text() const {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

const std::vector<std::string>& suite_groups(SuiteGroups which) {
  // The groups in the order the problems list them; TensorCore leaves out the odd extents.
  const auto groups_of = [](bool with_odd) {
    std::vector<std::string> groups;
    for (const catalog::SuiteProblem& p : catalog::suite_problems()) {
      if ((with_odd || p.group != kOddGroup) && std::find(groups.begin(), groups.end(), p.group) == groups.end()) {
        groups.push_back(p.group);
      }
    }
    return groups;
  };
  static const std::vector<std::string> kTensorCore = groups_of(false);
  static const std::vector<std::string> kWithOdd = groups_of(true);
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
  for (const catalog::SuiteProblem& p : catalog::suite_problems()) {  // suite order, each problem once
    if (std::find(wanted.begin(), wanted.end(), p.group) != wanted.end()) out.push_back({p.group, p.m, p.n, p.k});
  }
  return out;
}

}  // namespace gemmkit::verify
