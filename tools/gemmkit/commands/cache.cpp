// tools/gemmkit/commands/cache.cpp: gemmkit cache ls, info, clear, export FILE, import FILE: the on-disk kernel
// cache.
#include <cstdint>
#include <memory>

#include "commands/commands.hpp"
#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/jit.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {
namespace {

// What gemmkit cache parses: the subcommand, its archive, the pack that export takes.
struct CacheArgs {
  std::string what, file, pack, pack_file;
};

int cmd_cache(const std::string& what, const std::string& file, const std::string& pack, const std::string& pack_file,
              const Output& output) {
  if (file.empty() && what == "export") {
    throw UsageError(
        "gemmkit cache export needs the archive to write, a tar file: gemmkit cache export FILE.tar [--pack NAME | "
        "--pack-file FILE] (every entry of the cache, or only a pack's kernels), e.g. gemmkit cache export app.tar "
        "--pack-file app.pack.");
  }
  if (file.empty() && what == "import") {
    throw UsageError(
        "gemmkit cache import needs the archive to read, a tar file written by gemmkit cache export: gemmkit cache "
        "import FILE.tar, e.g. gemmkit cache import app.tar.");
  }
  gk::DiskCache cache;
  Json out = {{"root", cache.root()}};
  if (what == "export") {
    std::vector<std::string> keys;  // empty: every entry
    if (!pack.empty() || !pack_file.empty()) {
      const gk::Toolchain& toolchain = gk::Toolchain::discover();
      for (const gk::KernelSpec& spec : pack_of(pack, pack_file, "gemmkit cache export")) {
        for (const std::string& key : cache.keys(toolchain, gk::render(spec))) keys.push_back(key);
      }
    }
    out["file"] = file;
    out["exported"] = cache.export_archive(file, keys);
    output.print(out, "exported " + out["exported"].dump() + " entries of " + cache.root() + " to " + file + "\n");
    return 0;
  }
  if (what == "import") {
    const gk::DiskCache::ImportResult imported = cache.import_archive(file);
    out["file"] = file;
    out["imported"] = imported.imported;
    out["present"] = imported.present;
    output.print(out, "imported " + std::to_string(imported.imported) + " entries into " + cache.root() + " (" +
                          std::to_string(imported.present) + " were there already)\n");
    return 0;
  }
  if (what == "clear") {
    const std::size_t removed = cache.clear();
    const gk::DiskCache::TmpFolders tmp = cache.sweep_tmp();
    out["removed"] = removed;
    out["tmp_remaining"] = tmp.remaining;
    output.print(out, "removed " + std::to_string(removed) + " entries from " + cache.root() +
                          (tmp.remaining > 0 ? "; " + std::to_string(tmp.remaining) +
                                                   " build folders younger than an hour kept in v1/tmp (perhaps "
                                                   "builds in progress)"
                                             : "") +
                          "\n");
    return 0;
  }
  const gk::DiskCache::TmpFolders tmp = cache.sweep_tmp();
  const auto entries = cache.list();
  std::uint64_t total = 0;
  std::string text;
  for (const auto& e : entries) {
    total += e.bytes;
    if (what == "ls") text += e.key.substr(0, 12) + "  " + e.created + "  " + e.kernel_name + "\n";
  }
  out["entries"] = entries.size();
  out["bytes"] = total;
  if (what == "ls") out["list"] = entries;
  out["tmp_removed"] = tmp.removed;
  out["tmp_remaining"] = tmp.remaining;
  text += "cache " + cache.root() + ": " + std::to_string(entries.size()) + " entries, " + std::to_string(total) +
          " bytes\n";
  if (tmp.removed + tmp.remaining > 0) {
    text += "build folders in v1/tmp: " + std::to_string(tmp.removed) + " older than an hour removed (left by killed " +
            "builds), " + std::to_string(tmp.remaining) + " younger kept (perhaps builds in progress)\n";
  }
  Json packs = Json::array();
  for (const std::string& root : gk::DiskCache::pack_roots()) {
    const std::size_t count = gk::DiskCache(root).list().size();
    packs.push_back({{"root", root}, {"entries", count}});
    text += "pack " + root + ": " + std::to_string(count) + " entries (read only, searched after the cache)\n";
  }
  out["packs"] = packs;
  output.print(out, text);
  return 0;
}

}  // namespace

Command add_cache(CLI::App& gemmkit, Shared& shared) {
  auto args = std::make_shared<CacheArgs>();  // filled by the subcommand chosen
  CLI::App* app =
      add_command(gemmkit, "cache", "the on-disk kernel cache: ls, info, clear, export FILE, import FILE", shared);
  for (const char* what : {"ls", "info", "clear", "export", "import"}) {
    const std::string help = std::string("cache ") + what +
                             (what == std::string("export")   ? ": every entry into one tar archive"
                              : what == std::string("import") ? ": the entries of an archive, each checked"
                                                              : "");
    CLI::App* sub = add_command(*app, what, help.c_str(), shared);
    sub->callback([args, what] { args->what = what; });
    if (what == std::string("export") || what == std::string("import")) {
      // Not required() for CLI11: its "file is required" does not say which file; cmd_cache does.
      sub->add_option("file", args->file, "the archive: one plain tar file of cache entries, e.g. app.tar")
          ->type_name("FILE.tar");
    }
    if (what == std::string("export")) {
      sub->add_option("--pack", args->pack, "only this named pack's kernels")->type_name("NAME");
      sub->add_option("--pack-file", args->pack_file, "only the kernels of this pack file")->type_name("FILE");
    }
  }
  return {app, [&shared, args] {
            if (args->what.empty()) throw UsageError("gemmkit cache needs one of: ls, info, clear, export, import.");
            return cmd_cache(args->what, args->file, args->pack, args->pack_file, shared.output);
          }};
}

}  // namespace gemmkit::cli
