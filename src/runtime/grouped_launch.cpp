// src/runtime/grouped_launch.cpp: the list and contiguous forms of a grouped GEMM launch.
#include "runtime/grouped_launch.hpp"

#include <cstring>

#include "runtime/cuda_check.hpp"
#include "runtime/workspace.hpp"
#include "util/knobs.hpp"

namespace gemmkit::runtime {
namespace {

gk_grouped_args grouped_args(int groups, const GroupedCall& call) {
  gk_grouped_args args{};
  args.groups = groups;
  args.device_id = call.device;
  args.sm_count = call.sm_count;
  args.alpha = call.alpha;
  args.beta = call.beta;
  args.activation_params[0] = call.activation_parameter;
  return args;
}

bool same_bytes(const gk_grouped_args& a, const gk_grouped_args& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool same_problems(const std::vector<gk_grouped_problem>& a, const std::vector<gk_grouped_problem>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(gk_grouped_problem)) == 0;
}

void finish(cudaStream_t stream, bool any_host, bool sync) {
  // A stream being captured into a graph cannot be synchronised (and nothing has run yet).
  if (any_host || (sync && !is_capturing(stream))) GK_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

PinnedMetadata::~PinnedMetadata() {
  for (Buffer& buffer : buffers_) {
    if (buffer.kept_by_graph) continue;  // a live graph may still read it; the process keeps it
    if (buffer.copy_recorded) cudaEventSynchronize(buffer.copied);
    cudaEventDestroy(buffer.copied);
    cudaFreeHost(buffer.host);
  }
}

PinnedMetadata::Buffer& PinnedMetadata::take(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  RelaxedCaptureMode relaxed;  // querying events and pinning memory while the caller's stream is being captured
  for (Buffer& buffer : buffers_) {
    if (buffer.busy || buffer.kept_by_graph || buffer.bytes < bytes) continue;
    if (buffer.copy_recorded && cudaEventQuery(buffer.copied) == cudaErrorNotReady) {
      cudaGetLastError();  // an unfinished copy is no error for the calls that follow
      continue;
    }
    buffer.busy = true;
    return buffer;
  }
  Buffer& buffer = buffers_.emplace_back();
  GK_CUDA_CHECK(cudaMallocHost(&buffer.host, bytes));
  buffer.bytes = bytes;
  GK_CUDA_CHECK(cudaEventCreateWithFlags(&buffer.copied, cudaEventDisableTiming));
  buffer.busy = true;
  return buffer;
}

void PinnedMetadata::upload(const KernelModule& module, const gk_grouped_args& args,
                            const std::vector<gk_grouped_problem>& problems, void* device_metadata, std::size_t bytes,
                            cudaStream_t stream) {
  const bool capturing = is_capturing(stream);
  Buffer& buffer = take(bytes);
  struct Release {
    std::mutex& mutex;
    Buffer& buffer;
    ~Release() {
      std::lock_guard<std::mutex> lock(mutex);
      buffer.busy = false;
    }
  } release{mutex_, buffer};
  if (!same_bytes(buffer.args, args) || !same_problems(buffer.packed, problems)) {
    buffer.packed.clear();
    module.grouped_pack(args, problems.data(), buffer.host, bytes);
    buffer.args = args;
    buffer.packed = problems;
  }
  GK_CUDA_CHECK(cudaMemcpyAsync(device_metadata, buffer.host, bytes, cudaMemcpyHostToDevice, stream));
  if (capturing) {
    buffer.kept_by_graph = true;
  } else {
    GK_CUDA_CHECK(cudaEventRecord(buffer.copied, stream));
    buffer.copy_recorded = true;
  }
}

void launch_grouped(const KernelModule& module, const std::vector<GroupOperands>& groups, const GroupedCall& call,
                    PinnedMetadata& metadata, cudaStream_t stream, bool sync) {
  bool any_host = false;
  for (const GroupOperands& g : groups) {
    any_host |= !g.a.on_device || !g.b.on_device || !g.d.on_device || (g.c && !g.c->on_device);
  }
  refuse_staging_under_capture(any_host, stream);
  Staging staging(stream);
  std::vector<gk_grouped_problem> problems(groups.size());
  std::vector<void*> device_d(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const GroupOperands& g = groups[i];
    gk_grouped_problem& p = problems[i];
    p.m = static_cast<std::int32_t>(g.m);
    p.n = static_cast<std::int32_t>(g.n);
    p.k = static_cast<std::int32_t>(g.k);
    if (g.m == 0 || g.n == 0 || g.k == 0) continue;  // an empty group's pointers are never read: nothing to stage
    p.A = staging.on_device(g.a);
    p.B = staging.on_device(g.b);
    p.C = g.c ? staging.on_device(*g.c) : nullptr;
    p.D = device_d[i] = staging.on_device(g.d);  // a host D is copied in too: its gaps come back unchanged
    p.lda = g.a.ld;
    p.ldb = g.b.ld;
    p.ldc = g.c ? g.c->ld : g.d.ld;
    p.ldd = g.d.ld;
  }
  const gk_grouped_args args = grouped_args(static_cast<int>(groups.size()), call);
  const std::size_t bytes = module.grouped_metadata_bytes(args.groups);
  // Stream-ordered: no launch in flight elsewhere reads it, and under capture it is the graph's own.
  LaunchWorkspace device_metadata(call.device, bytes, stream);
  metadata.upload(module, args, problems, device_metadata.get(), bytes, stream);
  module.grouped_run(args, device_metadata.get(), stream);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (!groups[i].d.on_device && device_d[i] != nullptr) staging.copy_back(groups[i].d, device_d[i]);
  }
  finish(stream, any_host, sync);
}

void launch_grouped_contiguous(const KernelModule& module, const gk_grouped_contiguous& problem, int groups,
                               const GroupedCall& call, cudaStream_t stream, bool sync) {
  const gk_grouped_args args = grouped_args(groups, call);
  // Room for the entries of an SM90 module's bands (device/include/gemmkit/grouped_common.hpp: at least 512 rows
  // each, so at most one per group plus one per 512 rows); a module given less keeps one entry per group.
  constexpr std::int64_t kFewestBandRows = 512;
  const std::int64_t bands =
      knobs::flag("GEMMKIT_MOE_BANDS") ? (problem.total_m + kFewestBandRows - 1) / kFewestBandRows : 0;
  const std::int64_t entries = groups + bands;
  const std::size_t bytes = module.grouped_metadata_bytes(static_cast<int>(entries));
  LaunchWorkspace device_metadata(call.device, bytes, stream);
  module.grouped_run_contiguous(args, problem, device_metadata.get(), bytes, stream);
  finish(stream, false, sync);
}

}  // namespace gemmkit::runtime
