// src/jit/cache_archive.cpp: gemmkit cache export / import: complete entries into one tar archive and back, each
// entry checked against its manifest and renamed into place whole.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/errors.hpp"
#include "jit/cache_entries.hpp"
#include "jit/tar.hpp"
#include "util/sha256.hpp"

namespace gemmkit {

using namespace cache_entries;

namespace {

// An entry in an archive: manifest.json, kernel.cu and its artifact (kernel.so or kernel.cubin).
constexpr const char* kArchiveFiles[] = {"manifest.json", "kernel.so", "kernel.cubin", "kernel.cu"};

bool is_archive_file(const std::string& name) {
  return std::any_of(std::begin(kArchiveFiles), std::end(kArchiveFiles), [&](const char* f) { return name == f; });
}

// The files of an entry whose manifest records `artifact`.
std::vector<std::string> entry_files(const std::string& artifact) {
  return {"manifest.json", artifact, "kernel.cu"};
}

// Why the entry's files (name -> bytes) do not match its manifest, or "" when they do.
std::string entry_mismatch(const std::string& key, const std::map<std::string, std::string>& files) {
  if (!files.count("manifest.json")) return "it has no manifest.json";
  try {
    const Json manifest = Json::parse(files.at("manifest.json"));
    if (manifest.at("key").get<std::string>() != key) return "its manifest names another key";
    const std::string artifact = artifact_of(manifest);
    if (artifact.empty()) return "its manifest records neither kernel.so nor kernel.cubin";
    for (const std::string& name : entry_files(artifact)) {
      if (!files.count(name)) return "it has no " + name;
    }
    for (const std::string& name : {artifact, std::string("kernel.cu")}) {
      const Json& record = manifest.at("files").at(name);
      const std::string& data = files.at(name);
      if (record.at("bytes").get<std::uint64_t>() != data.size() ||
          record.at("sha256").get<std::string>() != sha256_hex(data)) {
        return name + " does not match the size and SHA-256 its manifest records";
      }
    }
  } catch (const Json::exception& e) {
    return std::string("its manifest is not a gemmkit manifest (") + e.what() + ")";
  }
  return "";
}

}  // namespace

std::size_t DiskCache::export_archive(const std::string& path, const std::vector<std::string>& keys) const {
  std::vector<std::string> wanted = keys;
  if (wanted.empty()) {
    for (const CacheListing& listing : list()) wanted.push_back(listing.key);
  }
  std::vector<tar::File> files;
  for (const std::string& key : wanted) {
    const std::optional<CacheEntry> entry = lookup(key);
    if (!entry) throw Error("cannot export " + key + ": no complete entry with that key in " + root_);
    for (const std::string& name : entry_files(fs::path(entry->module_path).filename().string())) {
      const std::optional<std::string> data = read_file(entry_dir(root_, key) / name);
      if (!data) throw Error("cannot read " + (entry_dir(root_, key) / name).string() + " to export it");
      files.push_back({key + "/" + name, *data});
    }
  }
  // Written beside the target and renamed over it: a reader never sees half an archive.
  const fs::path target(path);
  const fs::path partial = target.string() + ".partial." + unique_suffix();
  try {
    write_file(partial, tar::write(files));
  } catch (...) {
    std::error_code ec;
    fs::remove(partial, ec);
    throw;
  }
  std::error_code ec;
  fs::rename(partial, target, ec);
  if (ec) {
    fs::remove(partial, ec);
    throw Error("cannot write the archive " + path + ": " + ec.message());
  }
  return wanted.size();
}

DiskCache::ImportResult DiskCache::import_archive(const std::string& path) {
  const std::optional<std::string> bytes = read_file(path);
  if (!bytes) throw Error("cannot read the archive " + path);
  std::map<std::string, std::map<std::string, std::string>> entries;  // key -> file name -> bytes
  for (tar::File& file : tar::read(*bytes, "the archive " + path)) {
    const std::size_t slash = file.name.find('/');
    const std::string key = file.name.substr(0, slash);
    const std::string name = slash == std::string::npos ? "" : file.name.substr(slash + 1);
    if (!is_key(key) || !is_archive_file(name)) {
      throw Error("the archive " + path + " holds " + file.name +
                  ", which is not <key>/manifest.json, kernel.so, kernel.cubin or kernel.cu: it was not written by "
                  "gemmkit cache "
                  "export");
    }
    entries[key][name] = std::move(file.data);
  }
  const std::string root = build_roots().for_root(root_);
  ImportResult result;
  for (const auto& [key, files] : entries) {
    if (const std::string why = entry_mismatch(key, files); !why.empty()) {
      throw Error("the archive " + path + " has a damaged entry " + key + ": " + why);
    }
    KeyLock lock(root, key);
    bool damaged = false;
    if (find_complete(root, key, LockHeld::yes, damaged)) {
      ++result.present;
      continue;
    }
    const fs::path tmp = make_dir(v1_dir(root) / "tmp" / (key + ".import." + unique_suffix()));
    std::error_code ec;
    try {
      for (const auto& [name, data] : files) write_file(tmp / name, data);
      make_dir(entry_dir(root, key).parent_path());
      fs::rename(tmp, entry_dir(root, key), ec);
      if (ec) throw Error("cannot import " + key + " into " + entry_dir(root, key).string() + ": " + ec.message());
    } catch (...) {
      fs::remove_all(tmp, ec);
      throw;
    }
    ++result.imported;
  }
  return result;
}

}  // namespace gemmkit
