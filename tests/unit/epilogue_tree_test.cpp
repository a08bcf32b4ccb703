// tests/unit/epilogue_tree_test.cpp: epilogue visitor trees as values (one node per distinct subexpression, the
// canonical text and digest the cache key and kernel name carry, the checks a tree makes), on plans (SM90 only, in
// place of activation and bias), their SM90 rendering, and the visitor arguments run() checks before anything runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "api/visitor_args.hpp"
#include "epilogue/plain_form.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/epilogue.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using namespace gemmkit::epilogue;

namespace {

Epilogue notebook() {
  Expr F = store(scalar("alpha") * acc() + (scalar("beta") * source() + aux("aux")), "F");
  return Epilogue(relu(F + 1.0) + column_broadcast("bias") + F);
}

gk::GemmOptions sm90_f16() {
  gk::GemmOptions o;
  o.element = gk::DataType::f16;
  o.layout = gk::Layout::RowMajor;
  o.element_accumulator = gk::DataType::f32;
  o.cc = 90;
  return o;
}

long count(const Epilogue& tree, NodeKind kind) {
  return std::count_if(tree.nodes().begin(), tree.nodes().end(), [&](const Node& n) { return n.kind == kind; });
}

}  // namespace

TEST(EpilogueTree, OneNodePerDistinctSubexpression) {
  const Epilogue tree = notebook();
  EXPECT_EQ(count(tree, NodeKind::Accumulator), 1);
  EXPECT_EQ(count(tree, NodeKind::Store), 1);  // F is stored once and read twice
  EXPECT_EQ(tree.to_string(), "F = ((alpha * accum) + ((beta * C) + aux))\nD = ((relu((F + 1)) + bias) + F)\n");
  // acc() built twice is still one accumulator; so is a repeated subexpression.
  const Epilogue twice(acc() * 2.0 + acc() * 2.0);
  EXPECT_EQ(twice.nodes().size(), 4u);  // accum, 2, accum * 2, their sum
  const auto inputs = tree.inputs();
  ASSERT_EQ(inputs.size(), 4u);
  EXPECT_EQ(inputs[0]->name, "alpha");
  EXPECT_EQ(tree.outputs().size(), 1u);
  EXPECT_TRUE(tree.reads_source());
  EXPECT_FALSE(Epilogue(relu(acc())).reads_source());
}

TEST(EpilogueTree, CanonicalTextAndDigestFollowTheStructure) {
  EXPECT_EQ(notebook().canonical(), notebook().canonical());
  EXPECT_EQ(notebook().digest().size(), 8u);
  EXPECT_NE(Epilogue(acc() + 1.0).digest(), Epilogue(acc() + 2.0).digest());
  EXPECT_NE(Epilogue(acc() + aux("x")).digest(), Epilogue(acc() + aux("x", gk::DataType::f32)).digest());
  EXPECT_NE(Epilogue(leaky_relu(acc(), 0.1)).digest(), Epilogue(leaky_relu(acc(), 0.2)).digest());
  EXPECT_NE(Epilogue(acc() - aux("x")).digest(), Epilogue(aux("x") - acc()).digest());
}

TEST(EpilogueTree, StoresAndReductionsDReadsNotAreKept) {
  const Epilogue tree(acc() + source(), {store(acc() * 2.0, "G"), scalar_reduction(acc(), "total")});
  EXPECT_EQ(tree.outputs().size(), 2u);
  // A value built and then dropped is not part of the tree.
  Expr unused = acc() * 3.0;
  (void)unused;
  EXPECT_EQ(Epilogue(acc() + 1.0).nodes().size(), 3u);
  // D's value is always the last node, also when an output reads it.
  Expr d = acc() + 1.0;
  const Epilogue reads_d(d, {store(d, "copy")});
  EXPECT_EQ(reads_d.nodes().back().kind, NodeKind::Compute);
  EXPECT_EQ(reads_d.nodes().back().inputs, std::vector<int>{2});
}

TEST(EpilogueTree, MalformedTreesNameTheNode) {
  EXPECT_THROW(Epilogue(acc() + aux("D")), gk::ConfigError);  // reserved
  EXPECT_THROW(Epilogue(acc() + aux("x") + row_broadcast("x")), gk::ConfigError);
  EXPECT_THROW(Epilogue(store(acc() + aux("x"), "x")), gk::ConfigError);
  EXPECT_THROW(compute(ComputeOp::Add, {acc()}), gk::ConfigError);
  EXPECT_THROW(aux(""), gk::ConfigError);
  std::vector<Node> forward(2);
  forward[0].kind = NodeKind::Compute;
  forward[0].op = ComputeOp::Negate;
  forward[0].inputs = {1};
  try {
    Epilogue bad(forward);
    FAIL() << "a node reading a later one was accepted";
  } catch (const gk::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("epilogue node 0"), std::string::npos) << e.what();
  }
}

TEST(EpilogueTree, UnsetTypesAreThePlans) {
  const Epilogue tree = Epilogue(acc() + aux("x"), {store(acc(), "G"), row_reduction(acc(), "r")})
                            .with_types(gk::DataType::bf16, gk::DataType::f16);
  EXPECT_EQ(tree.find("x")->element, gk::DataType::bf16);
  EXPECT_EQ(tree.find("G")->element, gk::DataType::f16);
  EXPECT_EQ(tree.find("r")->element, gk::DataType::f32);
}

TEST(EpilogueTreePlan, Sm90PlansTakeATreeInPlaceOfTheirEpilogue) {
  gk::Gemm plan(sm90_f16());
  const std::string plain = plan.kernel_name();
  plan.set_epilogue_visitor(notebook());
  EXPECT_EQ(plan.kernel_name(), plain + "_evt" + notebook().with_types(gk::DataType::f16, gk::DataType::f16).digest());
  const std::string source = plan.render_source().text;
  for (const char* part : {"Sm90TopologicalVisitor", "Sm90AuxLoad", "Sm90AuxStore", "Sm90ColBroadcast", "Sm90SrcFetch",
                           "cutlass::epilogue::thread::ReLu", "VisitorModule<Gemm, VisitorArguments, 16>"}) {
    EXPECT_NE(source.find(part), std::string::npos) << part;
  }
  EXPECT_NE(plan.spec().canonical().find(";visitor="), std::string::npos);
  // The tree replaces activation and bias: setting one beside it is refused, and the tree stays.
  EXPECT_THROW(plan.set_activation(gk::Activation::ReLU), gk::ConfigError);
  EXPECT_THROW(plan.set_bias(gk::BiasMode::PerRow), gk::ConfigError);
  EXPECT_TRUE(plan.epilogue_visitor().has_value());
  plan.set_epilogue_visitor(std::nullopt);
  EXPECT_EQ(plan.kernel_name(), plain);
}

TEST(EpilogueTreePlan, Sm80PlansRenderTheVisitorEpilogue) {
  gk::GemmOptions o = sm90_f16();
  o.kernel_cc = 80;
  gk::Gemm sm80(o);
  sm80.set_epilogue_visitor(notebook());
  const std::string source = sm80.render_source().text;
  for (const char* part :
       {"DefaultGemmWithVisitor", "Sm80TopologicalVisitor", "VisitorAuxLoad<OutputTileThreadMap, ElementC",
        "VisitorAuxStore<OutputTileThreadMap, ElementD", "VisitorColBroadcast"}) {
    EXPECT_NE(source.find(part), std::string::npos) << part;
  }
  EXPECT_NE(sm80.kernel_name().find("_evt"), std::string::npos);
  gk::Gemm simt(o);
  simt.set_opclass(gk::OpClass::Simt);
  EXPECT_THROW(simt.set_epilogue_visitor(notebook()), gk::ConfigError);
  // Row-major tensors and no scalar reductions on 2.x; a tree whose buffers crowd out the mainloop takes another tile.
  EXPECT_THROW(sm80.set_epilogue_visitor(Epilogue(acc() + aux("x", std::nullopt, gk::Layout::ColumnMajor))),
               gk::ConfigError);
  EXPECT_THROW(sm80.set_epilogue_visitor(Epilogue(acc(), {scalar_reduction(acc(), "s")})), gk::ConfigError);
  gk::Gemm sm90(sm90_f16());
  const std::string default_tile = gk::shape_text(sm90.spec().tile.threadblock_shape);
  sm90.set_epilogue_visitor(Epilogue(acc() + aux("a") + aux("b", gk::DataType::f32) + aux("c", gk::DataType::f32)));
  EXPECT_NE(gk::shape_text(sm90.spec().tile.threadblock_shape), default_tile);
  gk::GemmOptions column = o;
  column.layout_c = gk::Layout::ColumnMajor;
  gk::Gemm column_major(column);
  EXPECT_THROW(column_major.set_epilogue_visitor(notebook()), gk::ConfigError);
}

TEST(EpilogueTreePlan, RulesAreRefused) {
  gk::Gemm plan(sm90_f16());
  EXPECT_THROW(plan.set_epilogue_visitor(Epilogue(row_reduction(acc(), "r", ReduceOp::Min))), gk::ConfigError);
  EXPECT_THROW(
      plan.set_epilogue_visitor(Epilogue(acc(), {row_reduction(acc(), "r", ReduceOp::Sum, gk::DataType::f16)})),
      gk::ConfigError);
  EXPECT_FALSE(plan.epilogue_visitor().has_value());
}

// The plain form act(alpha * (acc * row_scale * column_scale) + beta * C + bias) runs on the kernel the same settings
// build, whichever way the tree was written.
TEST(EpilogueTreePlainForm, PlainTreesRunTheKernelsOfTheSameSettings) {
  struct Case {
    const char* what;
    Epilogue tree;
    gk::Activation activation;
    gk::BiasMode bias;
    gk::ScaleMode scale;
  };
  const std::vector<Case> cases = {
      {"identity", plain_epilogue(), gk::Activation::Identity, gk::BiasMode::None, gk::ScaleMode::None},
      {"relu, row bias", plain_epilogue(gk::Activation::ReLU, gk::BiasMode::PerRow), gk::Activation::ReLU,
       gk::BiasMode::PerRow, gk::ScaleMode::None},
      {"gelu, scales", plain_epilogue(gk::Activation::GELU, gk::BiasMode::PerColumn, gk::ScaleMode::RowAndColumn),
       gk::Activation::GELU, gk::BiasMode::PerColumn, gk::ScaleMode::RowAndColumn},
      {"reordered", Epilogue(silu(row_broadcast("b") + source() * scalar("s") + acc() * 2.0)), gk::Activation::SiLU,
       gk::BiasMode::PerColumn, gk::ScaleMode::None},
      {"multiply-add", Epilogue(sigmoid(multiply_add(scalar("alpha"), acc(), column_broadcast("b")))),
       gk::Activation::Sigmoid, gk::BiasMode::PerRow, gk::ScaleMode::None},
      {"leaky_relu", Epilogue(leaky_relu(acc() + column_broadcast("b"), 0.2)), gk::Activation::LeakyReLU,
       gk::BiasMode::PerRow, gk::ScaleMode::None},
  };
  for (const Case& c : cases) {
    gk::Gemm settings(sm90_f16());
    settings.set_activation(c.activation, 0.2);
    settings.set_bias(c.bias);
    settings.set_scale(c.scale);
    gk::Gemm tree(sm90_f16());
    tree.set_epilogue_visitor(c.tree);
    EXPECT_EQ(tree.spec().canonical(), settings.spec().canonical()) << c.what;
    EXPECT_EQ(tree.kernel_name(), settings.kernel_name()) << c.what;
    EXPECT_EQ(tree.activation(), c.activation) << c.what;
    EXPECT_EQ(tree.bias(), c.bias) << c.what;
    EXPECT_EQ(tree.scale(), c.scale) << c.what;
    EXPECT_EQ(tree.epilogue(), c.tree) << c.what;
  }
  gk::Gemm leaky(sm90_f16());
  leaky.set_epilogue_visitor(Epilogue(leaky_relu(acc(), 0.3)));
  EXPECT_EQ(leaky.activation_parameter(), 0.3);
  // A plan's settings read back as their tree.
  gk::Gemm settings(sm90_f16());
  settings.set_activation(gk::Activation::Tanh);
  settings.set_bias(gk::BiasMode::PerColumn);
  EXPECT_EQ(settings.epilogue(), plain_epilogue(gk::Activation::Tanh, gk::BiasMode::PerColumn));
}

TEST(EpilogueTreePlainForm, OtherTreesKeepTheirVisitorKernel) {
  const gk::DataType f16 = gk::DataType::f16;
  for (const Epilogue& tree :
       {Epilogue(relu(acc()) + column_broadcast("b")),  // the bias after the activation
        Epilogue(acc() * acc()), Epilogue(acc() + aux("x")), Epilogue(relu(acc()), {store(acc(), "F")}),
        Epilogue(acc() - source()), Epilogue(acc() + row_broadcast("b", gk::DataType::f32)),  // a bias not of C's type
        Epilogue(acc() * row_broadcast("s", f16)),                                            // a scale not f32
        Epilogue(scalar("a") * scalar("b") * acc()), Epilogue(relu(relu(acc())))}) {
    EXPECT_FALSE(plain_form(tree, f16).has_value()) << tree.to_string();
    gk::Gemm plan(sm90_f16());
    plan.set_epilogue_visitor(tree);
    EXPECT_NE(plan.kernel_name().find("_evt"), std::string::npos) << tree.to_string();
  }
}

TEST(EpilogueTreePlainForm, TheTreeOwnsTheSettingsItSets) {
  gk::Gemm plan(sm90_f16());
  plan.set_epilogue_visitor(plain_epilogue(gk::Activation::ReLU, gk::BiasMode::PerRow));
  EXPECT_THROW(plan.set_activation(gk::Activation::GELU), gk::ConfigError);
  EXPECT_THROW(plan.set_bias(gk::BiasMode::None), gk::ConfigError);
  EXPECT_THROW(plan.set_scale(gk::ScaleMode::PerRow), gk::ConfigError);
  EXPECT_EQ(plan.activation(), gk::Activation::ReLU);
  plan.set_epilogue_visitor(std::nullopt);  // the settings go with the tree
  EXPECT_EQ(plan.activation(), gk::Activation::Identity);
  EXPECT_EQ(plan.bias(), gk::BiasMode::None);
  gk::Gemm settings(sm90_f16());
  settings.set_bias(gk::BiasMode::PerRow);
  EXPECT_THROW(settings.set_epilogue_visitor(plain_epilogue(gk::Activation::ReLU)), gk::ConfigError);
  EXPECT_FALSE(settings.epilogue_visitor().has_value());
  // A plain tree also runs where visitor kernels do not: CUTLASS 2.x SIMT.
  gk::GemmOptions o = sm90_f16();
  o.kernel_cc = 80;
  gk::Gemm simt(o);
  simt.set_opclass(gk::OpClass::Simt);
  simt.set_epilogue_visitor(plain_epilogue(gk::Activation::ReLU));
  EXPECT_EQ(simt.activation(), gk::Activation::ReLU);
  EXPECT_EQ(simt.kernel_name().find("_evt"), std::string::npos);
}

// Aux tensors take shared memory beside the mainloop's stages: tile_descriptions() lists only the tiles a tree fits,
// and each of them can be set.
TEST(EpilogueTreeTiles, TileDescriptionsListOnlyTheTilesTheTreeFits) {
  gk::Gemm plain(sm90_f16());
  gk::Gemm plan(sm90_f16());
  Expr sum = acc();
  for (const char* name : {"a", "b", "c", "d", "e", "f"}) sum = sum + aux(name, gk::DataType::f32);
  plan.set_epilogue_visitor(Epilogue(sum));
  const auto fitting = plan.tile_descriptions();
  ASSERT_FALSE(fitting.empty());
  EXPECT_LT(fitting.size(), plain.tile_descriptions().size());
  for (const gk::TileDescription& td : fitting) EXPECT_NO_THROW(plan.set_tile_description(td)) << td.to_string();
  for (const gk::TileDescription& td : plain.tile_descriptions()) {
    if (std::find(fitting.begin(), fitting.end(), td) == fitting.end()) {
      EXPECT_THROW(plan.set_tile_description(td), gk::ConfigError) << td.to_string();
    }
  }
}

// A plain tree whose settings no fused kernel of the plan offers (a 2.x kernel's bias runs along D's rows only, so a
// per-row bias with row-major C is refused as a setting) runs on the tree's own visitor kernel instead.
TEST(EpilogueTreePlainForm, APlainTreeWithoutAFusedKernelRunsItsVisitorKernel) {
  gk::GemmOptions o = sm90_f16();
  o.kernel_cc = 80;
  gk::Gemm settings(o);
  EXPECT_THROW(settings.set_bias(gk::BiasMode::PerRow), gk::ConfigError);
  gk::Gemm plan(o);
  const Epilogue tree(gelu(scalar("alpha") * acc() + scalar("beta") * source() + column_broadcast("bias")));
  ASSERT_TRUE(plain_form(tree, gk::DataType::f16).has_value());
  plan.set_epilogue_visitor(tree);
  EXPECT_TRUE(plan.spec().visitor.has_value());
  EXPECT_NE(plan.kernel_name().find("_evt"), std::string::npos) << plan.kernel_name();
  EXPECT_EQ(plan.activation(), gk::Activation::Identity);
  EXPECT_EQ(plan.bias(), gk::BiasMode::None);
  EXPECT_EQ(plan.epilogue(), tree);
  // Its transpose, a per-column bias, has the fused kernel.
  plan.set_epilogue_visitor(Epilogue(gelu(acc() + row_broadcast("bias"))));
  EXPECT_FALSE(plan.spec().visitor.has_value());
  EXPECT_EQ(plan.bias(), gk::BiasMode::PerColumn);
}

// A vector given once per batch is for the tree's own visitor kernel (run() takes the plan's tree twin for it); one
// vector for every batch is the fused kernel's bias.
TEST(VisitorArguments, APlainTreeTellsAVectorPerBatchFromOneForEveryBatch) {
  const Epilogue tree(acc() + row_broadcast("b"));
  const auto form = plain_form(tree, gk::DataType::f16);
  ASSERT_TRUE(form.has_value());
  gk::verify::HostMatrix shared(gk::DataType::f16, 1, 32, gk::Layout::RowMajor);
  gk::verify::HostMatrix per_batch(gk::DataType::f16, 1, 32, gk::Layout::RowMajor, 3);
  gk::RunOptions options;
  options.visitor_args = {{"b", shared.view(), 0}};
  EXPECT_FALSE(gk::detail::plain_vectors_per_batch(*form, options));
  options.visitor_args = {{"b", per_batch.view(), 0}};
  EXPECT_TRUE(gk::detail::plain_vectors_per_batch(*form, options)) << per_batch.view().shape_string();
  options.visitor_args = {{"other", per_batch.view(), 0}};  // not one of the tree's vectors
  EXPECT_FALSE(gk::detail::plain_vectors_per_batch(*form, options));
}

TEST(VisitorArguments, APlainTreeTakesItsScalarsAndVectorsByName) {
  const Epilogue tree(relu(scalar("s") * (acc() * column_broadcast("rs", gk::DataType::f32)) +
                           scalar("beta") * source() + row_broadcast("b")));
  const auto form = plain_form(tree, gk::DataType::f16);
  ASSERT_TRUE(form.has_value());
  gk::verify::HostMatrix b(gk::DataType::f16, 1, 32, gk::Layout::RowMajor);
  gk::verify::HostMatrix rs(gk::DataType::f32, 64, 1, gk::Layout::RowMajor);
  gk::RunOptions options;
  options.visitor_args = {{"s", std::nullopt, 0.5}, {"b", b.view(), 0}, {"rs", rs.view(), 0}};
  double alpha = 3.0, beta = 0.25;
  const gk::RunOptions plain = gk::detail::plain_run_options(tree, *form, options, alpha, beta);
  EXPECT_EQ(alpha, 0.5);  // the tree's scalar s
  EXPECT_EQ(beta, 0.25);  // a scalar named beta defaults to run()'s
  ASSERT_NE(plain.bias, nullptr);
  EXPECT_EQ(plain.bias->data, options.visitor_args[1].tensor->data);
  ASSERT_NE(plain.row_scale, nullptr);
  EXPECT_EQ(plain.row_scale->data, options.visitor_args[2].tensor->data);
  EXPECT_EQ(plain.column_scale, nullptr);
  EXPECT_TRUE(plain.visitor_args.empty());
  double unused_alpha = 1.0, unused_beta = 0.0;
  const Epilogue without_c(acc() + column_broadcast("b"));
  gk::RunOptions only_b;
  only_b.visitor_args = {{"b", rs.view(), 0}};
  (void)gk::detail::plain_run_options(without_c, *plain_form(without_c, gk::DataType::f32), only_b, unused_alpha,
                                      unused_beta);
  EXPECT_EQ(unused_alpha, 1.0);  // acc alone: alpha 1, whatever run() was given
  EXPECT_EQ(unused_beta, 0.0);   // no C
  for (auto [drop, what] : std::vector<std::pair<std::string, const char*>>{{"s", "is missing"}, {"b", "is missing"}}) {
    gk::RunOptions missing = options;
    std::erase_if(missing.visitor_args, [&](const auto& a) { return a.name == drop; });
    double a = 1.0, c = 0.0;
    try {
      (void)gk::detail::plain_run_options(tree, *form, missing, a, c);
      ADD_FAILURE() << "accepted without " << drop;
    } catch (const gk::TensorError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'" + drop + "'"), std::string::npos) << e.what();
    }
  }
  gk::RunOptions both = options;
  both.bias = &*options.visitor_args[1].tensor;
  double a = 1.0, c = 0.0;
  EXPECT_THROW((void)gk::detail::plain_run_options(tree, *form, both, a, c), gk::TensorError);
  gk::RunOptions unknown = options;
  unknown.visitor_args.push_back({"bias", b.view(), 0});
  EXPECT_THROW((void)gk::detail::plain_run_options(tree, *form, unknown, a, c), gk::TensorError);
}

TEST(VisitorArguments, EachTensorIsCheckedAgainstItsNode) {
  gk::KernelSpec spec;
  spec.family = gk::KernelFamily::Sm90Collective;
  spec.visitor = Epilogue(acc() + aux("x") + row_broadcast("r") + column_broadcast("c", gk::DataType::f32),
                          {store(acc(), "G"), scalar_reduction(acc(), "s", ReduceOp::Max)})
                     .with_types(gk::DataType::f16, gk::DataType::f16);
  const Epilogue& tree = *spec.visitor;
  const std::int64_t m = 64, n = 32, batch = 2;
  gk::verify::HostMatrix x(gk::DataType::f16, m, n, gk::Layout::RowMajor);
  gk::verify::HostMatrix r(gk::DataType::f16, 1, n, gk::Layout::RowMajor, batch);
  gk::verify::HostMatrix c(gk::DataType::f32, m, 1, gk::Layout::RowMajor);
  gk::verify::HostMatrix G(gk::DataType::f16, m, n, gk::Layout::RowMajor, batch);
  gk::verify::HostMatrix s(gk::DataType::f32, 1, 1, gk::Layout::RowMajor, batch);
  auto args = [&](std::vector<gk::VisitorArgument> extra = {}) {
    gk::RunOptions o;
    o.visitor_args = {
        {"x", x.view(), 0}, {"r", r.view(), 0}, {"c", c.view(), 0}, {"G", G.view(), 0}, {"s", s.view(), 0}};
    for (auto& e : extra) {
      std::erase_if(o.visitor_args, [&](const auto& a) { return a.name == e.name; });
      o.visitor_args.push_back(e);
    }
    return o;
  };
  const auto operands = gk::detail::check_visitor_args(spec, args(), 1.0, 0.0, m, n, batch);
  ASSERT_EQ(operands.size(), tree.nodes().size());
  const Node* rn = tree.find("r");
  const auto& r_operand = operands[static_cast<std::size_t>(rn - tree.nodes().data())];
  EXPECT_EQ(r_operand.tensor->batch_stride, n);  // one row vector per batch
  const auto& x_operand = operands[static_cast<std::size_t>(tree.find("x") - tree.nodes().data())];
  EXPECT_EQ(x_operand.tensor->batch_stride, 0);  // one matrix for every batch
  const auto& s_operand = operands[static_cast<std::size_t>(tree.find("s") - tree.nodes().data())];
  EXPECT_EQ(s_operand.fill_byte, 0xff);  // a maximum starts below every value
  EXPECT_TRUE(s_operand.output);

  gk::verify::HostMatrix x32(gk::DataType::f32, m, n, gk::Layout::RowMajor);
  gk::verify::HostMatrix column_as_row(gk::DataType::f32, 1, m, gk::Layout::RowMajor);
  gk::verify::HostMatrix G1(gk::DataType::f16, m, n, gk::Layout::RowMajor);  // one batch where D has two
  for (auto [extra, what] : std::vector<std::pair<gk::VisitorArgument, const char*>>{
           {{"x", x32.view(), 0}, "element type"},
           {{"c", column_as_row.view(), 0}, "shape"},
           {{"G", G1.view(), 0}, "output of 2 batches"},
           {{"x", std::nullopt, 3.0}, "is a number"},
           {{"unknown", std::nullopt, 1.0}, "no tensor or scalar of that name"}}) {
    try {
      (void)gk::detail::check_visitor_args(spec, args({extra}), 1.0, 0.0, m, n, batch);
      ADD_FAILURE() << "accepted " << extra.name;
    } catch (const gk::TensorError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
  gk::RunOptions missing = args();
  missing.visitor_args.pop_back();
  EXPECT_THROW((void)gk::detail::check_visitor_args(spec, missing, 1.0, 0.0, m, n, batch), gk::TensorError);
}

TEST(VisitorArguments, Sm80KernelsReadMatricesAndRowsInCsVectors) {
  gk::KernelSpec spec;
  spec.family = gk::KernelFamily::Sm80Universal;
  spec.alignment_c = 8;
  spec.visitor = Epilogue(acc() + row_broadcast("r") + aux("x")).with_types(gk::DataType::f16, gk::DataType::f16);
  const std::int64_t m = 16, n = 36;  // 36 f16 = 72 bytes: not a multiple of the 16-byte vector
  gk::verify::HostMatrix r(gk::DataType::f16, 1, n, gk::Layout::RowMajor);
  gk::verify::HostMatrix x(gk::DataType::f16, m, n, gk::Layout::RowMajor);
  gk::RunOptions o;
  o.visitor_args = {{"r", r.view(), 0}, {"x", x.view(), 0}};
  EXPECT_THROW((void)gk::detail::check_visitor_args(spec, o, 1.0, 0.0, m, n, 1), gk::TensorError);
  spec.alignment_c = 2;  // 4-byte vectors fit
  EXPECT_EQ(gk::detail::check_visitor_args(spec, o, 1.0, 0.0, m, n, 1).size(), spec.visitor->nodes().size());
}
