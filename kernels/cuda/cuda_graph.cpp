// Recording backend work into a CUDA graph (the trainer's captured step): the backend's one stream
// is captured while `body` enqueues its ops, the graph is instantiated once and replayed with
// cudaGraphLaunch. Per-launch inputs come from page-locked host memory through copy nodes
// (from_host_async) or from device memory the host fills before each launch.
//
// Capture runs in cudaStreamCaptureModeThreadLocal: a call on this thread that is illegal during
// capture (cudaMalloc, a synchronizing copy, cudaStreamSynchronize) fails instead of silently
// running, and the backend's own allocating / waiting entry points refuse up front with the op's
// name. Any failure ends the capture, discards the partial graph and reports why; nothing of the
// body ran, so the caller can run the same work uncaptured.
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace recipe::kernels::cuda {
namespace {

class CudaGraphWork final : public RecordedWork {
 public:
  CudaGraphWork(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraphWork() override { cudaGraphExecDestroy(exec_); }
  CudaGraphWork(const CudaGraphWork&) = delete;
  CudaGraphWork& operator=(const CudaGraphWork&) = delete;
  void launch() override { RECIPE_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

void CudaBackend::refuse_while_recording(const char* op) const {
  if (recording_)
    throw std::runtime_error(std::string("CUDA backend ") + op +
                             " was called while a step is being recorded into a CUDA graph; it "
                             "allocates or waits for the host, which a graph cannot replay");
}

void* CudaBackend::alloc_host(size_t bytes) {
  refuse_while_recording("alloc_host");
  void* p = nullptr;
  cudaError_t err = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("CUDA backend: cudaHostAlloc of " + std::to_string(bytes) +
                             " bytes of page-locked host memory failed: " + cudaGetErrorString(err));
  }
  std::memset(p, 0, bytes);
  return p;
}

void CudaBackend::free_host(void* p) {
  if (!p) return;
  refuse_while_recording("free_host");
  RECIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // no copy may still read it
  RECIPE_CUDA_CHECK(cudaFreeHost(p));
}

void CudaBackend::from_host_async(Tensor dst, const void* src) {
  if (!dst.numel()) return;
  if (dst.device != Device::cuda)
    throw std::invalid_argument("CUDA backend from_host_async: dst " + dst.shape_str() + " is not a CUDA tensor");
  RECIPE_CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src, dst.bytes(), cudaMemcpyHostToDevice, stream_));
}

std::unique_ptr<RecordedWork> CudaBackend::record(const std::function<void()>& body, std::string& why) {
  if (recording_) {
    why = "a recording is already in progress on this backend";
    return nullptr;
  }
  // A pending error from earlier work would surface inside the capture and be blamed on it.
  RECIPE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  cudaError_t err = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) {
    cudaGetLastError();
    why = std::string("cudaStreamBeginCapture failed: ") + cudaGetErrorString(err);
    return nullptr;
  }
  recording_ = true;
  std::string failure;
  try {
    body();
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "an unknown exception was thrown while recording";
  }
  recording_ = false;
  cudaGraph_t graph = nullptr;
  err = cudaStreamEndCapture(stream_, &graph);
  if (failure.empty() && err != cudaSuccess)
    failure = std::string("cudaStreamEndCapture failed: ") + cudaGetErrorString(err) +
              " (an op in the step cannot be captured)";
  cudaGetLastError();  // capture errors are not sticky; clear them for the uncaptured path
  if (!failure.empty()) {
    if (graph) cudaGraphDestroy(graph);
    why = one_line(failure);
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  // Node priorities: kernels keep the priority of the stream they were captured from (the NCCL
  // collectives' high-priority stream), as they have when launched eagerly.
  err = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    cudaGetLastError();
    why = std::string("cudaGraphInstantiate failed: ") + cudaGetErrorString(err);
    return nullptr;
  }
  // Moves the graph's resources to the device now rather than at its first launch.
  err = cudaGraphUpload(exec, stream_);
  if (err != cudaSuccess) {
    cudaGetLastError();
    cudaGraphExecDestroy(exec);
    why = std::string("cudaGraphUpload failed: ") + cudaGetErrorString(err);
    return nullptr;
  }
  return std::make_unique<CudaGraphWork>(exec, stream_);
}

}  // namespace recipe::kernels::cuda
