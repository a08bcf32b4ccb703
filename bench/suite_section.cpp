// bench/suite_section.cpp: the shape suite: gemmkit's default plan vs cuBLAS on every shape of the chosen
// groups (the gemm section's verified, interleaved method), with the geometric mean per group and over M >= 128 outside
// the odd group, whose SIMT kernels would drag down a mean meant for tensor-core kernels.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "bench.hpp"
#include "gemmkit/tuning.hpp"
#include "verify/shape_suite.hpp"

namespace bench {
namespace {

struct Geomean {
  double log_sum = 0.0;
  int count = 0;
  bool failed = false;
  Value json() const {
    if (failed || count == 0) return nullptr;
    return std::exp(log_sum / count);
  }
};

}  // namespace

SectionResult suite_section(Context& ctx) {
  SectionResult result;
  const auto shapes = gk::verify::shape_suite(ctx.options.groups, gk::verify::SuiteGroups::WithOdd);
  Table table{
      {"dtype", "group", "M x N x K", "kernel", "split-K", "gemmkit TFLOP/s", "cuBLAS TFLOP/s", "ratio", "gemmkit ms",
       "cuBLAS ms", "spread (max-min)/median", "calls x batches", "check (max rel diff)", "tuned"},
      {}};
  Value rows = Value::array(), geomeans = Value::object();
  std::string geomean_lines;
  for (const gk::DataType dtype : ctx.options.dtypes) {
    const std::string type_name(gk::to_string(dtype));
    gk::Gemm plan = default_plan(dtype, ctx);
    std::map<std::string, Geomean> by_group;
    Geomean large_m;  // M >= 128 on tensor-core kernels: the targets
    for (const auto& suite_shape : shapes) {
      const Shape s{suite_shape.m, suite_shape.n, suite_shape.k};
      std::printf("suite %s %s %s ...\n", type_name.c_str(), suite_shape.group.c_str(), s.text().c_str());
      std::fflush(stdout);
      Value row = Value::object();
      row["dtype"] = type_name;
      row["group"] = suite_shape.group;
      row["m"] = s.m;
      row["n"] = s.n;
      row["k"] = s.k;
      std::vector<std::string> cells = {type_name, suite_shape.group, s.text()};
      Geomean& group = by_group[suite_shape.group];
      const bool headline = s.m >= 128 && suite_shape.group != gk::verify::kOddGroup;
      try {
        const int applied = gk::tuning::counters().applied;
        const gk::KernelSpec spec = planned_spec(plan, s);            // the kernel run() picks
        const bool tuned = gk::tuning::counters().applied > applied;  // ... from the tuning database
        row["kernel_name"] = spec.name();
        row["opclass"] = std::string(gk::to_string(spec.opclass));
        row["tuned"] = tuned;
        cells.push_back("`" + spec.name() + "`");  // names the opclass and alignment: why an odd shape is slower
        const gk::KSplit split = planned_k_split(plan, s);
        row["decomposition"] = std::string(gk::to_string(split.mode));
        row["splits"] = split.splits;
        cells.push_back(split.mode == gk::Decomposition::SplitK         ? std::to_string(split.splits)
                        : split.mode == gk::Decomposition::DataParallel ? std::string("-")
                                                                        : std::string(gk::to_string(split.mode)));
        RowResult measured = measure_row(ctx, plan, dtype, s);
        row.update(measured.json);
        row["ok"] = true;
        cells.insert(cells.end(), measured.cells.begin(), measured.cells.end());
        cells.push_back(tuned ? "yes" : "-");
        group.log_sum += std::log(measured.ratio);
        ++group.count;
        if (headline) {
          large_m.log_sum += std::log(measured.ratio);
          ++large_m.count;
        }
      } catch (const std::exception& e) {
        result.ok = false;
        group.failed = true;
        if (headline) large_m.failed = true;
        row["ok"] = false;
        row["error"] = e.what();
        std::fprintf(stderr, "gemmkit_bench: FAILED suite %s %s: %s\n", type_name.c_str(), s.text().c_str(), e.what());
        cells.push_back("**FAILED**: " + std::string(e.what()));
        cells.resize(table.header.size(), "-");
        (void)cudaGetLastError();
      }
      table.rows.push_back(cells);
      rows.push_back(row);
    }
    Value per_group = Value::object();
    auto line = [&](const std::string& what, const Geomean& g) {
      const Value v = g.json();
      geomean_lines += "- " + type_name + " " + what + " **" +
                       (v.is_null() ? std::string("n/a (a row failed)") : fixed(v.get<double>(), 3)) + "**\n";
    };
    auto group_line = [&](const std::string& name, const std::string& note) {
      const auto it = by_group.find(name);
      if (it == by_group.end()) return;
      per_group[name] = it->second.json();
      line(name + note + ": geometric mean gemmkit/cuBLAS over " + std::to_string(it->second.count) + " shapes =",
           it->second);
    };
    for (const auto& name : gk::verify::suite_groups(gk::verify::SuiteGroups::TensorCore)) group_line(name, "");
    per_group["m_at_least_128"] = large_m.json();
    if (large_m.count > 0 || large_m.failed) line("every shape with M >= 128 outside the odd group:", large_m);
    group_line(std::string(gk::verify::kOddGroup), " (odd leading dimensions; not in the M >= 128 line)");
    geomeans[type_name] = per_group;
  }
  result.json["groups"] = ctx.options.groups.empty() ? "all" : ctx.options.groups;
  const char* split_k = std::getenv("GEMMKIT_SPLIT_K");  // "off": run() chose no split-K by itself
  result.json["split_k"] = split_k != nullptr && *split_k != '\0' ? split_k : "auto";
  result.json["tuning_database"] = gk::tuning::Database::default_path();
  result.json["rows"] = rows;
  result.json["geomean_ratio"] = geomeans;
  result.markdown =
      "## Shape suite (D = A@B, row-major, f32 accumulate, beta 0; ratio = cuBLAS time / gemmkit time; kernel: the "
      "one run() picked; split-K: the split count run() chose, or the Stream-K kernel's decomposition)\n\n" +
      table.markdown() + "\n" + geomean_lines;
  return result;
}

}  // namespace bench
