// verify/epilogue_reference.hpp: an epilogue visitor tree evaluated on the host in float64, element by element, for
// the tests and the benchmark's checks.
#pragma once

#include <map>
#include <string>

#include "gemmkit/epilogue.hpp"
#include "verify/host_matrix.hpp"

namespace gemmkit::verify {

// What a tree reads and writes on the host: inputs by name (matrices m x n, row vectors 1 x n, column vectors m x 1;
// batch 1 broadcasts over the batch), scalars by name (alpha and beta default to the run's), and the outputs it
// writes (stores m x n, reductions 1 x n, m x 1 or 1 x 1; an output of batch 1 reduces over every batch).
struct VisitorHost {
  std::map<std::string, const HostMatrix*> inputs;
  std::map<std::string, double> scalars;
  std::map<std::string, HostMatrix*> outputs;
};

// D and every output of `tree` for D = tree(A @ B, C, ...), in float64, each written rounded to its tensor's type.
// A and B may have batch 1 (broadcast) or D's batch.
void evaluate_visitor(const epilogue::Epilogue& tree, const HostMatrix& A, const HostMatrix& B, const HostMatrix* C,
                      HostMatrix& D, double alpha, double beta, const VisitorHost& host);

}  // namespace gemmkit::verify
