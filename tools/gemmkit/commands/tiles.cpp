// tools/gemmkit/commands/tiles.cpp: gemmkit tiles: every valid configuration of a plan, as a table.
#include <algorithm>
#include "commands/commands.hpp"
#include "plan_options.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {
namespace {

// Text columns padded to their widest cell.
std::string table_text(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c] + (c + 1 < row.size() ? std::string(width[c] - row[c].size() + 2, ' ') : "");
    }
    out += line + "\n";
  }
  return out;
}

// One line per configuration: index, CTA tile, cluster, stages, schedules and what it adds to the kernels' shared
// name prefix (printed once, above).
int cmd_tiles(const Values& args, bool grouped, const Output& output) {
  const auto owned = make_plan(args, grouped);
  gk::Plan& plan = *owned;
  const auto tiles = plan.tile_descriptions();
  std::vector<std::string> names;
  for (const auto& tile : tiles) {
    gk::KernelSpec spec = plan.spec();
    spec.tile = tile;
    names.push_back(spec.name());
  }
  // The prefix every name shares, cut after its last '_'.
  std::string prefix = names.empty() ? "" : names.front();
  for (const std::string& name : names) {
    prefix.resize(std::mismatch(prefix.begin(), prefix.end(), name.begin(), name.end()).first - prefix.begin());
  }
  prefix.resize(prefix.rfind('_') == std::string::npos ? 0 : prefix.rfind('_') + 1);
  std::vector<std::vector<std::string>> rows = {
      {"#", "cta tile", "cluster", "stages", "kernel schedule", "epilogue schedule", "tile scheduler", prefix + "..."}};
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const gk::TileDescription& t = tiles[i];
    rows.push_back({std::to_string(i), gk::shape_text(t.cta_tile()), gk::shape_text(t.cluster_shape),
                    t.stages == 0 ? "auto" : std::to_string(t.stages), std::string(gk::to_string(t.kernel_schedule)),
                    std::string(gk::to_string(t.epilogue_schedule)), std::string(gk::to_string(t.tile_scheduler)),
                    names[i].substr(prefix.size())});
  }
  Json records = Json::array();
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    Json record = tiles[i];
    record["cta_tile"] = tiles[i].cta_tile();
    record["kernel_name"] = names[i];
    records.push_back(record);
  }
  output.print({{"count", tiles.size()}, {"tile_descriptions", records}}, table_text(rows));
  return 0;
}

}  // namespace

Command add_tiles(CLI::App& gemmkit, Shared& shared) {
  CLI::App* app = add_command(gemmkit, "tiles", "list every valid configuration of a plan", shared);
  add_plan_options(*app, shared, true);
  return {app, [&shared] { return cmd_tiles(shared.values, shared.grouped, shared.output); }};
}

}  // namespace gemmkit::cli
