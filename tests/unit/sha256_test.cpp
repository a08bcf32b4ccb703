// tests/unit/sha256_test.cpp: our SHA-256 against the FIPS 180-4 / NIST test vectors, and the JSON round trip.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "util/sha256.hpp"
#include "gemmkit/errors.hpp"
#include "unit/test_env.hpp"
#include "util/json.hpp"

namespace gemmkit {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                       "mnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // 55, 56 and 64 bytes straddle the one-block / two-block padding boundary.
  EXPECT_EQ(sha256_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  const std::string text(1000, 'x');
  Sha256 hash;
  for (std::size_t i = 0; i < text.size(); i += 7) hash.update(std::string_view(text).substr(i, 7));
  EXPECT_EQ(hash.hex_digest(), sha256_hex(text));
}

TEST(Sha256, FileHashMatchesStringHash) {
  testenv::TempDir dir;
  const std::string text(200000, 'q');
  std::ofstream(dir.path() / "f", std::ios::binary) << text;
  EXPECT_EQ(sha256_file_hex((dir.path() / "f").string()), sha256_hex(text));
  EXPECT_THROW(sha256_file_hex((dir.path() / "missing").string()), Error);
}

TEST(Json, RoundTrip) {
  json::Value files = json::Value::object();
  files.set("kernel.so", json::Value::object().set("bytes", std::uint64_t{4123456}).set("sha256", "ab"));
  json::Value doc = json::Value::object();
  doc.set("key", "k\"\\\n\x01").set("n", 1.5).set("ok", true).set("none", nullptr).set("files", files);
  doc.set("list", json::Value::array().push_back(1).push_back("two"));
  for (bool indent : {true, false}) {
    const json::Value back = json::parse(doc.dump(indent));
    EXPECT_EQ(back.find("key")->as_string(), "k\"\\\n\x01");
    EXPECT_EQ(back.find("n")->as_number(), 1.5);
    EXPECT_TRUE(back.find("ok")->as_bool());
    EXPECT_TRUE(back.find("none")->is_null());
    EXPECT_EQ(back.find("files")->find("kernel.so")->find("bytes")->as_uint(), 4123456u);
    EXPECT_EQ(back.find("list")->items().at(1).as_string(), "two");
    EXPECT_EQ(back.dump(indent), doc.dump(indent));
  }
}

TEST(Json, ParsesEscapesAndRejectsGarbage) {
  EXPECT_EQ(json::parse(R"("\u00e9\ud83d\ude00\/")").as_string(), "\xc3\xa9\xf0\x9f\x98\x80/");
  EXPECT_EQ(json::parse(" [ -1.25e2 ] ").items().at(0).as_number(), -125.0);
  for (const char* bad : {"", "{", "{\"a\" 1}", "[1,]", "tru", "\"abc", "{} x", "01x", "\"\\q\"", "{'a':1}"}) {
    EXPECT_THROW(json::parse(bad), Error) << bad;
  }
  EXPECT_THROW(json::parse("\"s\"").as_number(), Error);
  EXPECT_THROW(json::parse("-1").as_uint(), Error);
}

}  // namespace
}  // namespace gemmkit
