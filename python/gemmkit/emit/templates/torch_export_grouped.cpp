// gemmkit/torch_export_grouped.cpp: gemmkit's torch glue for exported GroupedGemm kernels: outputs carved from one
// allocation, the per-group metadata packed into pinned memory and sent in one copy per call, the checked run and
// the op's registration (gemmkit/torch_export_common.h has what the kinds share).
#include "gemmkit/torch_export_common.h"

namespace {

// A grouped call's outputs, (rows, cols) each in D's layout: on CUDA, carved out of one block from torch's
// allocator at 256-byte aligned offsets, so that a call of many groups allocates once; on meta tensors, one each.
// Each output has a storage of its own (its data pointer holds a reference to the block), because torch requires a
// custom op's outputs not to alias one another (views of one storage would).
void release_block(void* block) {
  delete static_cast<c10::Storage*>(block);
}

std::vector<at::Tensor> allocate_grouped_outputs(const Operand& d, const at::Tensor& like,
                                                 const std::vector<std::pair<int64_t, int64_t>>& extents) {
  std::vector<at::Tensor> out;
  out.reserve(extents.size());
  if (like.is_meta()) {
    for (const auto& [rows, cols] : extents) out.push_back(allocate_output(d, like, std::nullopt, rows, cols));
    return out;
  }
  const int64_t element = static_cast<int64_t>(c10::elementSize(d.dtype));
  std::vector<int64_t> offsets;  // in bytes
  offsets.reserve(extents.size());
  int64_t bytes = 0;
  for (const auto& [rows, cols] : extents) {
    offsets.push_back(bytes);
    bytes += (rows * cols * element + 255) / 256 * 256;
  }
  const at::Tensor block =
      at::detail::empty_cuda({std::max<int64_t>(bytes, 1)}, at::kByte, like.device(), std::nullopt);
  auto* base = static_cast<char*>(block.data_ptr());
  const caffe2::TypeMeta dtype = c10::scalarTypeToTypeMeta(d.dtype);
  for (size_t g = 0; g < extents.size(); ++g) {
    const auto [rows, cols] = extents[g];
    c10::DataPtr data(base + offsets[g], new c10::Storage(block.storage()), &release_block, block.device());
    c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(rows * cols * element), std::move(data),
                         /*allocator=*/nullptr, /*resizable=*/false);
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), block.key_set(), dtype);
    const std::array<int64_t, 2> sizes{rows, cols}, strides{d.row_major ? cols : 1, d.row_major ? 1 : rows};
    t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
    out.push_back(std::move(t));
  }
  return out;
}

// An exported grouped kernel: the operands it describes (gk_grouped_describe) and its entry points.
struct GroupedKernel {
  Operand a, b, c, d;  // D has C's layout
  bool aligned_extents;
  gk_torch_grouped_entry_points entry_points;
};

GroupedKernel grouped_kernel(const gk_torch_grouped_entry_points& entry_points) {
  const gk_grouped_info& info = *entry_points.describe();
  const auto operand_of = [](int32_t dtype, int32_t layout, int32_t alignment) {
    return operand(gk_torch_operand{static_cast<gk_dtype>(dtype), static_cast<gk_layout>(layout), alignment});
  };
  return {operand_of(info.element_a, info.layout_a, info.alignment_a),
          operand_of(info.element_b, info.layout_b, info.alignment_b),
          operand_of(info.element_c, info.layout_c, info.alignment_c),
          operand_of(info.element_d, info.layout_c, info.alignment_d),
          info.aligned_extents != 0,
          entry_points};
}

// While a stream is captured into a CUDA graph (torch captures in the global mode), calls such as cudaHostAlloc or
// cudaEventQuery would invalidate the capture; this thread relaxes the mode while it manages its pinned buffers.
class RelaxedCapture {
 public:
  explicit RelaxedCapture(bool capturing) : active_(capturing) {
    if (active_) cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  ~RelaxedCapture() {
    if (active_) cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  bool active_;
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// Pinned host buffers for the packed metadata of grouped calls, so that each call sends it in one asynchronous
// copy. A buffer is reused once the copy that read it has finished (an event recorded after the copy); a buffer
// whose copy was captured into a CUDA graph is read by every replay, so it is never reused nor freed (the process
// keeps it: a few KB per captured call).
class PinnedBuffers {
 public:
  // Packs `problems` into a free buffer and queues its copy to `device_metadata` (`bytes` long) on `stream`.
  void upload(const GroupedKernel& kernel, const gk_grouped_args& args, const std::vector<gk_grouped_problem>& problems,
              void* device_metadata, size_t bytes, cudaStream_t stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    TORCH_CHECK(cudaStreamIsCapturing(stream, &capture) == cudaSuccess, "cannot query the stream's capture status");
    const bool capturing = capture != cudaStreamCaptureStatusNone;
    Buffer& buffer = take(bytes, args.device_id, capturing);
    struct Release {  // on every exit, errors included
      PinnedBuffers& owner;
      Buffer& buffer;
      ~Release() {
        const std::lock_guard<std::mutex> lock(owner.mutex_);
        buffer.busy = false;
      }
    } release{*this, buffer};
    const gk_torch_grouped_entry_points& module = kernel.entry_points;
    int32_t failed = -1;
    const int status = module.pack(&args, problems.data(), buffer.host, bytes, &failed);
    TORCH_CHECK(status == GK_OK, "kernel ", module.kernel_name(), " refused group ", failed, ": ", status_text(status));
    TORCH_CHECK(cudaMemcpyAsync(device_metadata, buffer.host, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess,
                "cannot copy the grouped metadata to the GPU: ", cudaGetErrorString(cudaGetLastError()));
    if (capturing) {
      buffer.kept_by_graph = true;
    } else {
      TORCH_CHECK(cudaEventRecord(buffer.copied, stream) == cudaSuccess, "cannot record an event on the stream");
      buffer.copy_recorded = true;
    }
  }

 private:
  struct Buffer {
    void* host = nullptr;
    size_t bytes = 0;
    int device = 0;  // of its event
    cudaEvent_t copied = nullptr;
    bool copy_recorded = false, busy = false, kept_by_graph = false;
  };

  Buffer& take(size_t bytes, int device, bool capturing) {
    const RelaxedCapture relaxed(capturing);
    const std::lock_guard<std::mutex> lock(mutex_);
    for (Buffer& buffer : buffers_) {
      if (buffer.busy || buffer.kept_by_graph || buffer.device != device || buffer.bytes < bytes) continue;
      if (buffer.copy_recorded && cudaEventQuery(buffer.copied) != cudaSuccess) {
        cudaGetLastError();  // cudaErrorNotReady: still copying, which is no error for later calls
        continue;
      }
      buffer.busy = true;
      return buffer;
    }
    Buffer buffer;
    buffer.bytes = std::max<size_t>(bytes, 4096);  // most calls of a process then share a few buffers
    buffer.device = device;
    TORCH_CHECK(cudaHostAlloc(&buffer.host, buffer.bytes, cudaHostAllocPortable) == cudaSuccess, "cannot allocate ",
                buffer.bytes, " bytes of pinned host memory: ", cudaGetErrorString(cudaGetLastError()));
    TORCH_CHECK(cudaEventCreateWithFlags(&buffer.copied, cudaEventDisableTiming) == cudaSuccess,
                "cannot create a CUDA event");
    buffer.busy = true;
    return buffers_.emplace_back(buffer);
  }

  std::mutex mutex_;
  std::deque<Buffer> buffers_;  // stable addresses; never freed (the process may exit while copies are queued)
};

PinnedBuffers pinned_buffers;

// D[g] = act(alpha * As[g] @ Bs[g] + beta * Cs[g]) for every group in one launch; `activation_parameter` is
// leaky_relu's slope. Groups with an empty D are skipped; one with K = 0 but a non-empty D is refused.
std::vector<at::Tensor> run_grouped(const GroupedKernel& kernel, at::TensorList As, at::TensorList Bs,
                                    const std::optional<at::TensorList>& Cs, double alpha, double beta,
                                    double activation_parameter) {
  const int64_t groups = static_cast<int64_t>(As.size());
  const bool c_given = Cs.has_value();
  TORCH_CHECK_VALUE(groups > 0, "As is empty; pass at least one group");
  TORCH_CHECK_VALUE(
      static_cast<int64_t>(Bs.size()) == groups && (!c_given || static_cast<int64_t>(Cs->size()) == groups), "As has ",
      groups, " tensors, Bs ", Bs.size(), c_given ? ", Cs " : "", c_given ? std::to_string(Cs->size()) : std::string(),
      "; pass one A, B", c_given ? " and C" : "", " per group");
  TORCH_CHECK_VALUE(c_given || beta == 0.0, "beta is ", beta, " but no Cs were given; pass Cs or beta=0");
  TORCH_CHECK_VALUE(groups <= INT32_MAX, "the kernel takes at most 2^31-1 groups");
  const at::Tensor& first = As[0];
  const Name first_name{"As", 0};
  TORCH_CHECK_VALUE(first.is_cuda() || first.is_meta(), first_name, " is on ", first.device(),
                    "; the kernel runs on CUDA tensors");
  // Every check that needs no output first, then the outputs in one allocation, then the rest.
  std::vector<std::array<Matrix, 3>> checked(static_cast<size_t>(groups));  // a, b, c per group
  std::vector<std::pair<int64_t, int64_t>> extents(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    const Name a_name{"As", g}, b_name{"Bs", g}, c_name{"Cs", g};
    auto& [a, b, c] = checked[static_cast<size_t>(g)];
    a = check_matrix(As[g], a_name, kernel.a, first, first_name, /*batches=*/false);
    b = check_matrix(Bs[g], b_name, kernel.b, first, first_name, /*batches=*/false);
    TORCH_CHECK_VALUE(a.cols == b.rows, a_name, " is ", a.rows, " x ", a.cols, " (M x K) but ", b_name, " is ", b.rows,
                      " x ", b.cols, " (K x N); their K extents must agree");
    if (c_given) {
      c = check_matrix((*Cs)[g], c_name, kernel.c, first, first_name, /*batches=*/false);
      TORCH_CHECK_VALUE(c.rows == a.rows && c.cols == b.cols, c_name, " is ", c.rows, " x ", c.cols, " but ", a_name,
                        " @ ", b_name, " is ", a.rows, " x ", b.cols);
    }
    extents[static_cast<size_t>(g)] = {a.rows, b.cols};
  }
  std::vector<at::Tensor> D = allocate_grouped_outputs(kernel.d, first, extents);
  std::vector<gk_grouped_problem> problems(static_cast<size_t>(groups));
  bool any_work = false;
  for (int64_t g = 0; g < groups; ++g) {
    const Name a_name{"As", g}, b_name{"Bs", g}, c_name{"Cs", g}, d_name{"D", g};
    const auto& [a, b, c] = checked[static_cast<size_t>(g)];
    const int64_t m = a.rows, n = b.cols, k = a.cols;
    if (m == 0 || n == 0) continue;  // nothing to compute; the kernel skips the group and reads none of its pointers
    TORCH_CHECK_VALUE(k > 0, a_name, " and ", b_name, ": K is 0 but ", d_name, " is ", m, " x ", n,
                      "; the kernel needs K >= 1 (D is then beta * C, activated: compute that group without it)");
    TORCH_CHECK_VALUE(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX, "group ", g, ": the problem ", m, " x ", n,
                      " x ", k, " exceeds 2^31-1 in one dimension");
    if (first.is_meta()) continue;
    const at::Tensor& out = D[static_cast<size_t>(g)];
    const Matrix d = check_matrix(out, d_name, kernel.d, first, first_name, /*batches=*/false);
    check_alignment(As[g], a_name, kernel.a, a, kernel.aligned_extents);
    check_alignment(Bs[g], b_name, kernel.b, b, kernel.aligned_extents);
    if (c_given) check_alignment((*Cs)[g], c_name, kernel.c, c, kernel.aligned_extents);
    check_alignment(out, d_name, kernel.d, d, kernel.aligned_extents);
    gk_grouped_problem& p = problems[static_cast<size_t>(g)];
    p.m = static_cast<int32_t>(m);
    p.n = static_cast<int32_t>(n);
    p.k = static_cast<int32_t>(k);
    p.A = As[g].data_ptr();
    p.B = Bs[g].data_ptr();
    p.C = c_given ? (*Cs)[g].data_ptr() : nullptr;
    p.D = out.data_ptr();
    p.lda = a.ld;
    p.ldb = b.ld;
    p.ldc = c_given ? c.ld : d.ld;
    p.ldd = d.ld;
    any_work = true;
  }
  if (!any_work) return D;

  const int device = first.get_device();
  const DeviceGuard guard(device);
  const gk_torch_grouped_entry_points& module = kernel.entry_points;
  gk_grouped_args args{};
  args.groups = static_cast<int32_t>(groups);
  args.device_id = device;
  args.sm_count = multiprocessor_count(device);
  args.alpha = alpha;
  args.beta = beta;
  args.activation_params[0] = activation_parameter;
  // One block from torch's allocator, stream-ordered like the launch: the metadata, then the workspace.
  const size_t metadata_bytes = module.metadata_bytes(args.groups);
  const size_t workspace_offset = (metadata_bytes + 255) / 256 * 256;
  const size_t workspace_bytes = module.workspace_size(&args);
  const at::Tensor buffer = at::detail::empty_cuda({static_cast<int64_t>(workspace_offset + workspace_bytes)},
                                                   at::kByte, first.device(), std::nullopt);
  auto* metadata = static_cast<char*>(buffer.data_ptr());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  pinned_buffers.upload(kernel, args, problems, metadata, metadata_bytes, stream);
  const int status = module.run(&args, metadata, workspace_bytes > 0 ? metadata + workspace_offset : nullptr, stream);
  check_launch(status, module.kernel_name, module.last_cuda_error);
  TORCH_CHECK(status == GK_OK, "kernel ", module.kernel_name(), " refused the call of ", groups,
              " groups: ", status_text(status));
  return D;
}

}  // namespace

extern "C" const char* gk_torch_register_grouped_v1(const char* ns, const char* schema, int takes_slope,
                                                    const gk_torch_grouped_entry_points* entry_points) {
  return register_op(ns, schema, [&](torch::Library& library) {
    const GroupedKernel kernel = grouped_kernel(*entry_points);
    if (takes_slope) {
      library.impl("run",
                   [kernel](at::TensorList As, at::TensorList Bs, const std::optional<at::TensorList>& Cs, double alpha,
                            double beta, double slope) { return run_grouped(kernel, As, Bs, Cs, alpha, beta, slope); });
    } else {
      library.impl("run",
                   [kernel](at::TensorList As, at::TensorList Bs, const std::optional<at::TensorList>& Cs, double alpha,
                            double beta) { return run_grouped(kernel, As, Bs, Cs, alpha, beta, 0.0); });
    }
  });
}
