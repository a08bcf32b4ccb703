// tests/unit/knobs_test.cpp: the environment table is the one the README documents and the CLI prints.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "support/cli.hpp"
#include "util/knobs.hpp"

namespace {

std::string readme() {
  const auto path = std::filesystem::path(GEMMKIT_GOLDEN_DIR).parent_path().parent_path() / "README.md";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST(Knobs, TheReadmeTableListsExactlyTheKnobs) {
  const std::string text = readme();
  ASSERT_FALSE(text.empty());
  std::set<std::string> documented;
  const std::regex row(R"(\n\| `([A-Z_]+)(=1)?` \|)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), row); it != std::sregex_iterator(); ++it) {
    documented.insert((*it)[1]);
  }
  std::set<std::string> table;
  for (const auto& k : gemmkit::knobs::all()) table.insert(k.name);
  EXPECT_EQ(documented, table);
}

TEST(Knobs, HelpPrintsEveryKnob) {
  const auto r = gemmkit::testing::run_cli("help env");
  EXPECT_EQ(r.status, 0);
  for (const auto& k : gemmkit::knobs::all()) EXPECT_NE(r.out.find(k.name), std::string::npos) << k.name;
}

TEST(Knobs, UnknownNamesAreAProgrammingError) {
  EXPECT_ANY_THROW(gemmkit::knobs::value("GEMMKIT_NO_SUCH_KNOB"));
}
