// python/src/epilogue.cpp: epilogue visitor trees for Python: EpilogueExpr (a node under construction, with the
// arithmetic operators), the node constructors gemmkit.epilogue's tracer calls, and Epilogue (a finished tree).
#include "gemmkit/epilogue.hpp"

#include <map>

#include <nanobind/operators.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "gemmkit/errors.hpp"

namespace gemmkit::python {
namespace {

using namespace gemmkit::epilogue;

// The operations _evt_compute takes by name (activations and conversions have constructors of their own), as the
// tree's canonical text spells them.
ComputeOp compute_op(const std::string& name) {
  constexpr ComputeOp ops[] = {ComputeOp::Add,         ComputeOp::Subtract, ComputeOp::Multiply, ComputeOp::Divide,
                               ComputeOp::MultiplyAdd, ComputeOp::Maximum,  ComputeOp::Minimum,  ComputeOp::Negate};
  std::string offered;
  for (ComputeOp op : ops) {
    if (name == to_string(op)) return op;
    offered += (offered.empty() ? "" : ", ") + std::string(to_string(op));
  }
  throw ConfigError("epilogue: no operation named '" + name + "'; there are " + offered + ".");
}

// The reductions the kernels offer (sum and max; min is refused by the families, with the reason).
ReduceOp reduce_op(const std::string& name) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    if (name == to_string(op)) return op;
  }
  throw ConfigError("epilogue: no reduction named '" + name + "'; there are sum and max.");
}

std::vector<std::string> names(const std::vector<const Node*>& nodes) {
  std::vector<std::string> out;
  for (const Node* node : nodes) out.push_back(node->name);
  return out;
}

}  // namespace

void bind_epilogue(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<Expr>(m, "EpilogueExpr",
                   "A value of an epilogue visitor tree under construction (gemmkit.epilogue.trace builds these).")
      .def(nb::init<double>(), "constant"_a)
      .def(nb::self + nb::self)
      .def(nb::self - nb::self)
      .def(nb::self * nb::self)
      .def(nb::self / nb::self)
      .def(-nb::self)
      .def("__add__", [](const Expr& a, double b) { return a + Expr(b); })
      .def("__radd__", [](const Expr& a, double b) { return Expr(b) + a; })
      .def("__sub__", [](const Expr& a, double b) { return a - Expr(b); })
      .def("__rsub__", [](const Expr& a, double b) { return Expr(b) - a; })
      .def("__mul__", [](const Expr& a, double b) { return a * Expr(b); })
      .def("__rmul__", [](const Expr& a, double b) { return Expr(b) * a; })
      .def("__truediv__", [](const Expr& a, double b) { return a / Expr(b); })
      .def("__rtruediv__", [](const Expr& a, double b) { return Expr(b) / a; });

  m.def("_evt_accumulator", &acc, "The accumulator A @ B.");
  m.def("_evt_source", &source, "The GEMM's C.");
  m.def("_evt_aux", &aux, "name"_a, "element"_a = nb::none(), "layout"_a = Layout::RowMajor,
        "A named m x n input tensor.");
  m.def("_evt_row_broadcast", &row_broadcast, "name"_a, "element"_a = nb::none(),
        "A named row vector (1, n), broadcast over the rows.");
  m.def("_evt_column_broadcast", &column_broadcast, "name"_a, "element"_a = nb::none(),
        "A named column vector (m, 1), broadcast over the columns.");
  m.def("_evt_scalar", &scalar, "name"_a, "A named scalar given at run time.");
  m.def(
      "_evt_compute",
      [](const std::string& op, const std::vector<Expr>& inputs) { return compute(compute_op(op), inputs); }, "op"_a,
      "inputs"_a, "An elementwise operation of its inputs.");
  m.def("_evt_activation", &activation, "activation"_a, "value"_a, "parameter"_a = 0.01, "An activation.");
  m.def("_evt_convert", &convert, "value"_a, "element"_a, "Rounds to a type and back.");
  m.def("_evt_store", &store, "value"_a, "name"_a, "element"_a = nb::none(), "layout"_a = Layout::RowMajor,
        "Writes the value to a named m x n output and stands for it.");
  m.def(
      "_evt_reduction",
      [](const std::string& kind, const Expr& value, const std::string& name, const std::string& op,
         std::optional<DataType> element) {
        const ReduceOp reduce = reduce_op(op);
        if (kind == "row") return row_reduction(value, name, reduce, element);
        if (kind == "column") return column_reduction(value, name, reduce, element);
        if (kind == "scalar") return scalar_reduction(value, name, reduce, element);
        throw ConfigError("epilogue: a reduction is row, column or scalar, not '" + kind + "'.");
      },
      "kind"_a, "value"_a, "name"_a, "op"_a = "sum", "element"_a = nb::none(),
      "Reduces the value into a named row vector (kind 'row', over the rows), column vector ('column') or scalar.");

  m.def("plain_epilogue", &plain_epilogue, "activation"_a = Activation::Identity, "bias"_a = BiasMode::None,
        "scale"_a = ScaleMode::None, "activation_parameter"_a = 0.01,
        "The tree of a plan's own epilogue settings, act(alpha * (acc * row_scale * column_scale) + beta * C + bias). "
        "A tree of this form (any names and order) set as epilogue_visitor runs the fused kernel of those settings.");

  nb::class_<Epilogue>(m, "Epilogue",
                       "An epilogue visitor tree: loads, computes, stores and reductions over the accumulator. Set "
                       "it as plan.epilogue_visitor; run() takes its tensors by name (visitor_args).")
      .def(nb::init<const Expr&, const std::vector<Expr>&>(), "D"_a, "outputs"_a = std::vector<Expr>{},
           "The tree whose value D takes; `outputs`: stores and reductions D does not read.")
      .def_prop_ro(
          "inputs", [](const Epilogue& e) { return names(e.inputs()); },
          "The names of the tensors and scalars the tree reads, in tree order.")
      .def_prop_ro(
          "outputs", [](const Epilogue& e) { return names(e.outputs()); },
          "The names of the tensors it writes besides D (stores and reductions).")
      .def_prop_ro("reads_source", &Epilogue::reads_source, "Whether the tree reads C.")
      .def_prop_ro(
          "nodes",
          [](const Epilogue& e) {
            std::vector<std::map<std::string, nb::object>> out;
            for (const Node& node : e.nodes()) {
              out.push_back({{"kind", nb::cast(std::string(to_string(node.kind)))},
                             {"name", nb::cast(node.name)},
                             {"element", node.element ? nb::cast(*node.element) : nb::none()},
                             {"layout", nb::cast(node.layout)},
                             {"op", nb::cast(std::string(to_string(node.op)))},
                             {"activation", nb::cast(node.activation)},
                             {"value", nb::cast(node.value)},
                             {"reduce", nb::cast(std::string(to_string(node.reduce)))},
                             {"inputs", nb::cast(node.inputs)}});
            }
            return out;
          },
          "The nodes in tree order, one dict each (kind, name, element, layout, op, activation, value, reduce, "
          "inputs): the order of the launch's visitor operands.")
      .def("canonical", &Epilogue::canonical, "A stable text of the structure: what the cache key hashes.")
      .def_prop_ro("digest", &Epilogue::digest, "8 hex digits of the canonical text, as kernel names carry it.")
      .def("__str__", &Epilogue::to_string)
      .def("__repr__",
           [](const Epilogue& e) { return "<gemmkit.Epilogue " + e.digest() + ":\n" + e.to_string() + ">"; })
      .def(
          "__eq__", [](const Epilogue& a, const Epilogue& b) { return a == b; }, nb::is_operator());
}

}  // namespace gemmkit::python
