// tests/gpu/concurrency_gpu_test.cpp: one plan on many streams at once (Stream-K workspaces), from many threads, in
// CUDA graphs and on two GPUs; every result exact, and a watchdog that fails the test instead of hanging the GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "support/gpu_cases.hpp"
#include "support/gpu_test.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;
using gk::verify::DeviceBuffer;
using gk::verify::HostMatrix;
namespace cases = gk::gpu_cases;

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// GEMMKIT_TEST_ROUNDS caps a test's rounds (a quick pass over a changed tree may take fewer than the full count).
int rounds(int full) {
  const char* text = std::getenv("GEMMKIT_TEST_ROUNDS");
  return text != nullptr ? std::min(full, std::max(1, std::atoi(text))) : full;
}

// Ends the process with a failure when a test makes no progress for `seconds` (a spinning kernel cannot be stopped
// from the host, and a test that never returns would hang the whole tier); pet() marks progress.
class Watchdog {
 public:
  explicit Watchdog(std::string what, int seconds = 60) : what_(std::move(what)), seconds_(seconds) {
    pet();
    thread_ = std::thread([this] {
      while (!done_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (std::chrono::steady_clock::now().time_since_epoch().count() > deadline_.load()) {
          std::fprintf(stderr, "WATCHDOG: %s made no progress for %d s: the GPU or the host is hung; failing.\n",
                       what_.c_str(), seconds_);
          std::fflush(stderr);
          std::_Exit(3);
        }
      }
    });
  }
  ~Watchdog() {
    done_ = true;
    thread_.join();
  }
  void pet() {
    deadline_ = (std::chrono::steady_clock::now() + std::chrono::seconds(seconds_)).time_since_epoch().count();
  }

 private:
  std::string what_;
  int seconds_;
  std::atomic<long long> deadline_{0};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Waits for every stream (a hang is caught by the test's Watchdog).
void wait_for(const std::vector<cudaStream_t>& streams, const std::string& what) {
  for (cudaStream_t s : streams) {
    cudaError_t status;
    while ((status = cudaStreamQuery(s)) == cudaErrorNotReady)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    ASSERT_EQ(status, cudaSuccess) << what << ": " << cudaGetErrorString(status);
  }
}

HostMatrix small_integers(HostMatrix matrix, std::uint64_t seed) {
  matrix.fill_integers(seed, -3, 3);
  return matrix;
}

// The exact D = A@B + C: the float64 reference rounded to D's type (exact on small integers).
HostMatrix exact_result(const HostMatrix& A, const HostMatrix& B, const HostMatrix& C, gk::DataType element_d) {
  HostMatrix out(element_d, C.rows(), C.cols(), C.layout());
  for (long r = 0; r < C.rows(); ++r) {
    for (long c = 0; c < C.cols(); ++c) {
      out.set(0, r, c, gk::verify::round_to(element_d, gk::verify::reference_element(A, B, &C, 1.0, 1.0, 0, r, c)));
    }
  }
  return out;
}

// One problem on small integers with its exact expected D (the float64 reference rounded to D's type), device copies
// of A, B, C and D, and a pinned host buffer D is copied back into.
struct Problem {
  HostMatrix A, B, C, expected;
  DeviceBuffer dA, dB, dC, dD;
  void* pinned = nullptr;

  Problem(const gk::Gemm& plan, long m, long n, long k, std::uint64_t seed)
      : A(small_integers(HostMatrix(plan.element_a(), m, k, plan.layout_a()), seed)),
        B(small_integers(HostMatrix(plan.element_b(), k, n, plan.layout_b()), seed + 1)),
        C(small_integers(HostMatrix(plan.element_c(), m, n, plan.layout_c()), seed + 2)),
        expected(plan.element_d(), 1, 1, plan.layout_c()),
        dA(A),
        dB(B),
        dC(C),
        dD(static_cast<std::size_t>(m) * n * gk::bits_of(plan.element_d()) / 8) {
    expected = exact_result(A, B, C, plan.element_d());
    EXPECT_EQ(cudaMallocHost(&pinned, expected.bytes()), cudaSuccess);
  }
  ~Problem() { cudaFreeHost(pinned); }

  // Poisons D, runs the plan (without waiting, unless `sync`) and queues the copy back, all on `stream`.
  void launch(gk::Gemm& plan, cudaStream_t stream, bool sync = false) {
    EXPECT_EQ(cudaMemsetAsync(dD.get(), 0x7f, expected.bytes(), stream), cudaSuccess);
    gk::RunOptions options;
    options.stream = stream;
    options.sync = sync;
    plan.run(A.view_at(dA.get(), gk::current_device()), B.view_at(dB.get(), gk::current_device()),
             C.view_at(dC.get(), gk::current_device()), expected.view_at(dD.get(), gk::current_device()), 1.0, 1.0,
             options);
    EXPECT_EQ(cudaMemcpyAsync(pinned, dD.get(), expected.bytes(), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  }
  bool exact() const { return std::memcmp(pinned, expected.data(), expected.bytes()) == 0; }
};

// Holds every stream at a host callback until all launches are queued, so that they really run at the same time.
class StartingGate {
 public:
  StartingGate() {
    EXPECT_EQ(cudaStreamCreateWithFlags(&gate_, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(cudaEventCreateWithFlags(&opened_, cudaEventDisableTiming), cudaSuccess);
  }
  ~StartingGate() {
    cudaEventDestroy(opened_);
    cudaStreamDestroy(gate_);
  }
  void close_before(const std::vector<cudaStream_t>& streams) {
    open_ = false;
    EXPECT_EQ(cudaLaunchHostFunc(gate_, &StartingGate::wait, &open_), cudaSuccess);
    EXPECT_EQ(cudaEventRecord(opened_, gate_), cudaSuccess);
    for (cudaStream_t s : streams) EXPECT_EQ(cudaStreamWaitEvent(s, opened_, 0), cudaSuccess);
  }
  void open() { open_ = true; }

 private:
  static void wait(void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  }
  cudaStream_t gate_ = nullptr;
  cudaEvent_t opened_ = nullptr;
  std::atomic<bool> open_{true};
};

std::vector<cudaStream_t> make_streams(int count) {
  std::vector<cudaStream_t> streams(count);
  for (auto& s : streams) EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  return streams;
}

void destroy_streams(const std::vector<cudaStream_t>& streams) {
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
}

gk::Gemm stream_k_plan(int kernel_cc) {
  gk::GemmOptions o = cases::epilogue_options(gk::DataType::f16, device_cc(), kernel_cc);
  gk::Gemm plan(o);
  plan.set_swizzling_functor(gk::Swizzle::StreamK);
  return plan;
}

// Per stream its own problem; long K over few output tiles, so Stream-K splits every tile across many SMs.
std::vector<std::unique_ptr<Problem>> stream_problems(const gk::Gemm& plan, int count) {
  std::vector<std::unique_ptr<Problem>> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(
        std::make_unique<Problem>(plan, 256 + 64 * (i % 3), 256 + 128 * (i % 2), 2048 + 512 * (i % 4), 100 + 7 * i));
  }
  return out;
}

// N streams, one plan, `rounds` rounds of simultaneous launches; every D of every round must be exact.
void run_rounds(gk::Gemm& plan, int stream_count, int rounds) {
  Watchdog watchdog(plan.kernel_name() + " on " + std::to_string(stream_count) + " streams");
  auto problems = stream_problems(plan, stream_count);
  const auto streams = make_streams(stream_count);
  // A first round without the gate: loading a kernel (CUDA's lazy loading) may wait for the device, which the
  // gate's blocked host callback would never let go idle.
  for (int i = 0; i < stream_count; ++i) problems[i]->launch(plan, streams[i]);
  wait_for(streams, "the warm-up round");
  StartingGate gate;
  int wrong = 0;
  for (int round = 0; round < rounds && wrong == 0; ++round) {
    watchdog.pet();
    gate.close_before(streams);
    for (int i = 0; i < stream_count; ++i) problems[i]->launch(plan, streams[i]);
    gate.open();
    wait_for(streams,
             plan.kernel_name() + " on " + std::to_string(stream_count) + " streams, round " + std::to_string(round));
    for (int i = 0; i < stream_count; ++i) {
      if (!problems[i]->exact()) {
        ADD_FAILURE() << "stream " << i << " round " << round << ": D differs from the exact result";
        ++wrong;
      }
    }
  }
  destroy_streams(streams);
  std::printf("[reliability] streams=%d rounds=%d kernel=%s wrong=%d\n", stream_count, rounds,
              plan.kernel_name().c_str(), wrong);
}

class StreamKStreams : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(StreamKStreams, ThousandRoundsExactWithoutHanging) {
  REQUIRE_GPU();
  const auto [kernel_cc, stream_count] = GetParam();
  if (kernel_cc > device_cc()) GTEST_SKIP() << "SM" << kernel_cc << " kernels need an SM" << kernel_cc << " GPU";
  gk::Gemm plan = stream_k_plan(kernel_cc);
  run_rounds(plan, stream_count, rounds(1000));
}

INSTANTIATE_TEST_SUITE_P(Gpu, StreamKStreams, ::testing::Combine(::testing::Values(90, 80), ::testing::Values(2, 4, 8)),
                         [](const auto& info) {
                           return "sm" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "_streams";
                         });

TEST(GpuConcurrency, DefaultPlanOnEightStreams) {
  REQUIRE_GPU();
  gk::Gemm plan(cases::epilogue_options(gk::DataType::f16, device_cc(), device_cc() >= 90 ? 90 : 80));
  run_rounds(plan, 8, rounds(200));
}

// Eight threads share one plan, each with its own stream and shapes, each checking every result.
TEST(GpuConcurrency, EightThreadsShareOnePlan) {
  REQUIRE_GPU();
  gk::Gemm plan = stream_k_plan(device_cc() >= 90 ? 90 : 80);
  constexpr int kThreads = 8, kCalls = 100;
  Watchdog watchdog("8 threads sharing " + plan.kernel_name(), 120);
  auto problems = stream_problems(plan, kThreads);
  const int device = gk::current_device();
  std::atomic<int> wrong{0}, calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
      cudaStream_t stream;
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      for (int i = 0; i < kCalls; ++i) {
        problems[t]->launch(plan, stream);
        wait_for({stream}, "thread " + std::to_string(t));
        watchdog.pet();
        if (!problems[t]->exact()) ++wrong;
        ++calls;
      }
      cudaStreamDestroy(stream);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(calls.load(), kThreads * kCalls);
  std::printf("[reliability] threads=%d calls=%d kernel=%s wrong=%d\n", kThreads, calls.load(),
              plan.kernel_name().c_str(), wrong.load());
}

// run() captured into a graph, replayed many times on new data each time, also on another stream while the plan
// runs eagerly on the capture stream: each replay has its own workspace (graph memory nodes).
void capture_and_replay(gk::Gemm& plan, int replays) {
  Watchdog watchdog("graph replays of " + plan.kernel_name());
  Problem p(plan, 256, 384, 3072, 7);
  HostMatrix A2 = p.A;  // odd replays read another A; B and C stay
  A2.fill_integers(99, -3, 3);
  const HostMatrix expected2 = exact_result(A2, p.B, p.C, plan.element_d());
  DeviceBuffer dA2(A2.bytes());
  CUDA_OK(cudaMemcpy(dA2.get(), A2.data(), A2.bytes(), cudaMemcpyHostToDevice));
  DeviceBuffer dA1(p.A.bytes());
  CUDA_OK(cudaMemcpy(dA1.get(), p.A.data(), p.A.bytes(), cudaMemcpyHostToDevice));
  const auto streams = make_streams(2);
  cudaStream_t capture = streams[0], other = streams[1];

  // Host tensors cannot be captured: a typed error, and the capture stays usable.
  CUDA_OK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeGlobal));
  gk::RunOptions capturing;
  capturing.stream = capture;
  EXPECT_THROW(plan.run(p.A.view(), p.B.view(), p.C.view(), p.expected.view(), 1.0, 1.0, capturing), gk::TensorError);
  // sync = true inside a capture: nothing is synchronised (that would end the capture with an error).
  p.launch(plan, capture, /*sync=*/true);
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(capture, &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  Problem eager(plan, 256, 256, 4096, 31);
  int wrong = 0;
  for (int i = 0; i < replays; ++i) {
    const bool second = i % 2 == 1;
    cudaStream_t replay_stream = i % 3 == 0 ? other : capture;
    CUDA_OK(cudaMemcpyAsync(p.dA.get(), second ? dA2.get() : dA1.get(), p.A.bytes(), cudaMemcpyDeviceToDevice,
                            replay_stream));
    CUDA_OK(cudaGraphLaunch(exec, replay_stream));
    if (replay_stream == other) eager.launch(plan, capture);  // the same plan, eagerly, beside the replay
    wait_for(streams, "graph replay " + std::to_string(i) + " of " + plan.kernel_name());
    watchdog.pet();
    const HostMatrix& want = second ? expected2 : p.expected;
    if (std::memcmp(p.pinned, want.data(), want.bytes()) != 0) ++wrong;
    if (replay_stream == other && !eager.exact()) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  destroy_streams(streams);
  std::printf("[reliability] graph_replays=%d kernel=%s wrong=%d\n", replays, plan.kernel_name().c_str(), wrong);
}

TEST(GpuGraphs, DefaultPlanCapturedAndReplayed) {
  REQUIRE_GPU();
  gk::Gemm plan(cases::epilogue_options(gk::DataType::f16, device_cc(), device_cc() >= 90 ? 90 : 80));
  capture_and_replay(plan, 200);
}

TEST(GpuGraphs, StreamKCapturedAndReplayedOnBothGenerations) {
  REQUIRE_GPU();
  for (int kernel_cc : cases::kernel_generations(device_cc())) {
    gk::Gemm plan = stream_k_plan(kernel_cc);
    capture_and_replay(plan, 200);
  }
}

// One plan used on two GPUs at once, a thread each: modules load per device, each launch has a workspace there.
TEST(GpuDevices, OnePlanOnTwoGpus) {
  REQUIRE_GPU();
  if (gk::cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices; " << gk::cuda_device_count() << " visible";
  gk::Gemm plan = stream_k_plan(device_cc() >= 90 ? 90 : 80);
  Watchdog watchdog("one plan on two GPUs", 120);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int device = 0; device < 2; ++device) {
    threads.emplace_back([&, device] {
      ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
      auto problems = stream_problems(plan, 2);
      const auto streams = make_streams(2);
      for (int round = 0; round < 200; ++round) {
        for (int i = 0; i < 2; ++i) problems[i]->launch(plan, streams[i]);
        wait_for(streams, "device " + std::to_string(device));
        watchdog.pet();
        for (auto& p : problems) wrong += p->exact() ? 0 : 1;
      }
      destroy_streams(streams);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  std::printf("[reliability] devices=2 rounds=200 kernel=%s wrong=%d\n", plan.kernel_name().c_str(), wrong.load());
}

}  // namespace
