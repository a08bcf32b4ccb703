// verify/epilogue_reference.cpp: the float64 host evaluation of an epilogue visitor tree.
#include "verify/epilogue_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace gemmkit::verify {
namespace {

using epilogue::ComputeOp;
using epilogue::Node;
using epilogue::NodeKind;
using epilogue::ReduceOp;

double compute(const Node& node, const std::vector<double>& in) {
  switch (node.op) {
    case ComputeOp::Add: return in[0] + in[1];
    case ComputeOp::Subtract: return in[0] - in[1];
    case ComputeOp::Multiply: return in[0] * in[1];
    case ComputeOp::Divide: return in[0] / in[1];
    case ComputeOp::MultiplyAdd: return in[0] * in[1] + in[2];
    case ComputeOp::Maximum: return std::max(in[0], in[1]);
    case ComputeOp::Minimum: return std::min(in[0], in[1]);
    case ComputeOp::Negate: return -in[0];
    case ComputeOp::Activation: return apply_activation(node.activation, in[0], node.value);
    case ComputeOp::Convert: return round_to(*node.element, in[0]);
  }
  return 0.0;
}

const HostMatrix& input(const VisitorHost& host, const std::string& name) {
  auto it = host.inputs.find(name);
  if (it == host.inputs.end()) throw std::invalid_argument("evaluate_visitor: no input named " + name);
  return *it->second;
}

HostMatrix& output(const VisitorHost& host, const std::string& name) {
  auto it = host.outputs.find(name);
  if (it == host.outputs.end()) throw std::invalid_argument("evaluate_visitor: no output named " + name);
  return *it->second;
}

std::int64_t batch_of(const HostMatrix& x, std::int64_t b) {
  return x.batch() == 1 ? 0 : b;
}

}  // namespace

void evaluate_visitor(const epilogue::Epilogue& tree, const HostMatrix& A, const HostMatrix& B, const HostMatrix* C,
                      HostMatrix& D, double alpha, double beta, const VisitorHost& host) {
  const std::vector<Node>& nodes = tree.nodes();
  // Reductions start from their identity; each output element accumulates in float64 and is rounded at the end.
  std::map<std::string, std::vector<double>> reduced;
  for (const Node& node : nodes) {
    if (!epilogue::is_reduction(node.kind)) continue;
    const HostMatrix& out = output(host, node.name);
    const double identity = node.reduce == ReduceOp::Sum   ? 0.0
                            : node.reduce == ReduceOp::Max ? -std::numeric_limits<double>::infinity()
                                                           : std::numeric_limits<double>::infinity();
    reduced[node.name].assign(static_cast<std::size_t>(out.batch() * out.rows() * out.cols()), identity);
  }
  std::vector<double> value(nodes.size());
  for (std::int64_t b = 0; b < D.batch(); ++b) {
    for (std::int64_t i = 0; i < D.rows(); ++i) {
      for (std::int64_t j = 0; j < D.cols(); ++j) {
        for (std::size_t n = 0; n < nodes.size(); ++n) {
          const Node& node = nodes[n];
          std::vector<double> in;
          for (int x : node.inputs) in.push_back(value[static_cast<std::size_t>(x)]);
          double& v = value[n];
          switch (node.kind) {
            case NodeKind::Accumulator: {
              v = 0.0;
              for (std::int64_t k = 0; k < A.cols(); ++k) {
                v += A.get(batch_of(A, b), i, k) * B.get(batch_of(B, b), k, j);
              }
              break;
            }
            case NodeKind::Source: v = C->get(batch_of(*C, b), i, j); break;
            case NodeKind::Matrix: {
              const HostMatrix& x = input(host, node.name);
              v = x.get(batch_of(x, b), i, j);
              break;
            }
            case NodeKind::RowBroadcast: {
              const HostMatrix& x = input(host, node.name);
              v = x.get(batch_of(x, b), 0, j);
              break;
            }
            case NodeKind::ColumnBroadcast: {
              const HostMatrix& x = input(host, node.name);
              v = x.get(batch_of(x, b), i, 0);
              break;
            }
            case NodeKind::Scalar: {
              auto it = host.scalars.find(node.name);
              v = it != host.scalars.end() ? it->second : node.name == "alpha" ? alpha : beta;
              break;
            }
            case NodeKind::Constant: v = node.value; break;
            case NodeKind::Compute: v = compute(node, in); break;
            case NodeKind::Store: {
              HostMatrix& out = output(host, node.name);
              out.set(b, i, j, round_to(out.dtype(), in[0]));
              v = in[0];
              break;
            }
            case NodeKind::RowReduction:
            case NodeKind::ColumnReduction:
            case NodeKind::ScalarReduction: {
              const HostMatrix& out = output(host, node.name);
              const std::int64_t r = node.kind == NodeKind::ColumnReduction ? i : 0;
              const std::int64_t c = node.kind == NodeKind::RowReduction ? j : 0;
              double& slot =
                  reduced[node.name][static_cast<std::size_t>((batch_of(out, b) * out.rows() + r) * out.cols() + c)];
              slot = node.reduce == ReduceOp::Sum   ? slot + in[0]
                     : node.reduce == ReduceOp::Max ? std::max(slot, in[0])
                                                    : std::min(slot, in[0]);
              v = in[0];
              break;
            }
          }
        }
        D.set(b, i, j, round_to(D.dtype(), value.back()));
      }
    }
  }
  for (auto& [name, values] : reduced) {
    HostMatrix& out = output(host, name);
    for (std::int64_t b = 0; b < out.batch(); ++b) {
      for (std::int64_t r = 0; r < out.rows(); ++r) {
        for (std::int64_t c = 0; c < out.cols(); ++c) {
          out.set(b, r, c,
                  round_to(out.dtype(), values[static_cast<std::size_t>((b * out.rows() + r) * out.cols() + c)]));
        }
      }
    }
  }
}

}  // namespace gemmkit::verify
