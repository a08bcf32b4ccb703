// tests/unit/umbrella_header_test.cpp: gemmkit/gemmkit.hpp alone is enough to declare a plan and catch what it throws
// (no other gemmkit header is included here on purpose).
#include <gtest/gtest.h>

#include <string>
#include <type_traits>

#include "gemmkit/gemmkit.hpp"

namespace {

// The integer tensor-core kernels need A row-major and B column-major, so TensorOp on an all-row-major s8 plan has no
// kernel: the plan refuses it before anything is compiled or any GPU is asked for.
gemmkit::GemmOptions s8_row_major() {
  gemmkit::GemmOptions o;
  o.element = gemmkit::DataType::s8;
  o.element_c = gemmkit::DataType::s32;
  o.element_d = gemmkit::DataType::s32;
  o.element_accumulator = gemmkit::DataType::s32;
  o.layout = gemmkit::Layout::RowMajor;
  o.cc = 80;
  return o;
}

}  // namespace

TEST(UmbrellaHeader, DeclaresThePlansOfEveryKind) {
  static_assert(std::is_base_of_v<gemmkit::Plan, gemmkit::Gemm>);
  static_assert(std::is_base_of_v<gemmkit::Plan, gemmkit::GroupedGemm>);
  static_assert(std::is_base_of_v<gemmkit::Plan, gemmkit::Conv2d>);
  static_assert(std::is_base_of_v<gemmkit::Error, gemmkit::ConfigError>);
  gemmkit::Gemm plan(s8_row_major());
  EXPECT_EQ(plan.opclass(), gemmkit::OpClass::Simt);
}

TEST(UmbrellaHeader, AnUnsupportedOpclassIsCaughtAsGemmkitError) {
  gemmkit::Gemm plan(s8_row_major());
  std::string caught;
  try {
    plan.set_opclass(gemmkit::OpClass::TensorOp);
  } catch (const gemmkit::Error& e) {
    EXPECT_NE(dynamic_cast<const gemmkit::ConfigError*>(&e), nullptr) << e.what();
    caught = e.what();
  }
  EXPECT_NE(caught.find("Unsupported operation class TensorOp for CC 80"), std::string::npos) << caught;
  EXPECT_EQ(plan.opclass(), gemmkit::OpClass::Simt);  // a refused setting leaves the plan as it was
}
