// Times every execution plan cuDNN offers for the engine's fused attention graphs (the same
// graphs as kernels/cuda/cudnn_attention.cpp: packed QKV [B, T, 3, H, D], causal, stats saved),
// per heuristic mode, against the plan the engine takes (the heuristic's first).
//   g++ -O2 -std=c++20 bench/micro/sdpa_plans.cpp -I<cudnn-frontend include> -I/usr/local/cuda/include \
//       -L/usr/local/cuda/lib64 -lcudnn -lnvrtc -lcuda -lcudart -o sdpa_plans
//   ./sdpa_plans [B=16] [T=1024] [H=16] [D=64]
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cudnn_frontend.h>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace fe = cudnn_frontend;

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV };

std::shared_ptr<fe::graph::Graph> make_graph(int64_t B, int64_t T, int64_t H, int64_t D, bool backward,
                                             bool deterministic) {
  const int64_t C3 = 3 * H * D;
  const std::vector<int64_t> qkv_stride{T * C3, D, C3, 1}, o_stride{T * H * D, D, H * D, 1};
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, const std::vector<int64_t>& stride) {
    return g->tensor(
        fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({B, H, T, D}).set_stride(stride));
  };
  auto Q = tensor("Q", kQ, qkv_stride), K = tensor("K", kK, qkv_stride), V = tensor("V", kV, qkv_stride);
  const float scale = 1.f / std::sqrt(float(D));
  if (!backward) {
    auto [O, S] = g->sdpa(
        Q, K, V,
        fe::graph::SDPA_attributes().set_name("f").set_generate_stats(true).set_attn_scale(scale).set_causal_mask(
            true));
    O->set_output(true).set_uid(kO).set_dim({B, H, T, D}).set_stride(o_stride);
    S->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({B, H, T, 1})
        .set_stride({H * T, T, 1, 1});
  } else {
    auto O = tensor("O", kO, o_stride), dO = tensor("dO", kdO, o_stride);
    auto S = g->tensor(fe::graph::Tensor_attributes()
                           .set_name("S")
                           .set_uid(kStats)
                           .set_dim({B, H, T, 1})
                           .set_stride({H * T, T, 1, 1})
                           .set_data_type(fe::DataType_t::FLOAT));
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, S,
                                         fe::graph::SDPA_backward_attributes()
                                             .set_name("b")
                                             .set_attn_scale(scale)
                                             .set_causal_mask(true)
                                             .set_deterministic_algorithm(deterministic));
    dQ->set_output(true).set_uid(kdQ).set_dim({B, H, T, D}).set_stride(qkv_stride);
    dK->set_output(true).set_uid(kdK).set_dim({B, H, T, D}).set_stride(qkv_stride);
    dV->set_output(true).set_uid(kdV).set_dim({B, H, T, D}).set_stride(qkv_stride);
  }
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int64_t B = argc > 1 ? std::atoll(argv[1]) : 16, T = argc > 2 ? std::atoll(argv[2]) : 1024;
  const int64_t H = argc > 3 ? std::atoll(argv[3]) : 16, D = argc > 4 ? std::atoll(argv[4]) : 64;
  cudnnHandle_t h;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) return 1;
  std::printf("cuDNN %zu, B=%lld T=%lld H=%lld D=%lld\n", cudnnGetVersion(), (long long)B, (long long)T, (long long)H,
              (long long)D);
  const size_t n = size_t(B * T * 3 * H * D);
  void *qkv, *dqkv, *o, *dout, *stats, *ws;
  cudaMalloc(&qkv, n * 2);
  cudaMalloc(&dqkv, n * 2);
  cudaMalloc(&o, n * 2);
  cudaMalloc(&dout, n * 2);
  cudaMalloc(&stats, size_t(B * H * T) * 4);
  const size_t ws_bytes = size_t(1) << 30;
  cudaMalloc(&ws, ws_bytes);
  {
    std::vector<uint16_t> r(n);
    uint32_t s = 12345;
    for (auto& x : r) s = s * 1664525u + 1013904223u, x = uint16_t(0x3c00 | ((s >> 16) & 0x3ff)) ^ ((s >> 8) & 0x8000);
    cudaMemcpy(qkv, r.data(), n * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dout, r.data(), n * 2 / 3, cudaMemcpyHostToDevice);
  }
  const double causal_flops = 4.0 * double(B * H) * double(T) * double(T) * double(D) / 2;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const char* B_ = "bf16";
  (void)B_;
  for (int backward = 0; backward < 2; ++backward)
    for (int det = 0; det <= backward; ++det) {
      // The forward must run once so that O and stats are valid inputs of the backward.
      for (auto mode : {fe::HeurMode_t::A, fe::HeurMode_t::B, fe::HeurMode_t::FALLBACK, fe::HeurMode_t::OPENSOURCE}) {
        auto g = make_graph(B, T, H, D, backward, det);
        std::string why;
        auto step = [&](fe::error_t st, const char* what) {
          if (!st.is_good()) why = std::string(what) + ": " + st.get_message();
          return st.is_good();
        };
        bool ok = step(g->validate(), "validate") && step(g->build_operation_graph(h), "build_operation_graph") &&
                  step(g->create_execution_plans({mode}), "create_execution_plans") &&
                  step(g->check_support(h), "check_support") &&
                  step(g->build_plans(h, fe::BuildPlanPolicy_t::ALL), "build_plans");
        const char* mname = mode == fe::HeurMode_t::A          ? "A"
                            : mode == fe::HeurMode_t::B        ? "B"
                            : mode == fe::HeurMode_t::FALLBACK ? "FALLBACK"
                                                               : "OPENSOURCE";
        std::printf("%s%s mode %s: ", backward ? "backward" : "forward", det ? " (deterministic)" : "", mname);
        if (!ok) {
          std::printf("unavailable (%s)\n", why.substr(0, 160).c_str());
          continue;
        }
        const int64_t plans = g->get_execution_plan_count();
        std::printf("%lld plans\n", (long long)plans);
        auto* base = static_cast<char*>(qkv);
        auto* dbase = static_cast<char*>(dqkv);
        const size_t hb = size_t(D) * 2;
        std::unordered_map<int64_t, void*> pack{
            {kQ, base}, {kK, base + H * hb}, {kV, base + 2 * H * hb}, {kO, o}, {kStats, stats}};
        if (backward) {
          pack[kdO] = dout;
          pack[kdQ] = dbase;
          pack[kdK] = dbase + H * hb;
          pack[kdV] = dbase + 2 * H * hb;
        }
        for (int64_t i = 0; i < plans; ++i) {
          int64_t wsz = 0;
          (void)g->get_workspace_size_plan_at_index(i, wsz);
          if (size_t(wsz) > ws_bytes) {
            std::printf("  plan %lld: workspace %lld too large\n", (long long)i, (long long)wsz);
            continue;
          }
          if (!g->execute_plan_at_index(h, pack, ws, i).is_good()) {
            std::printf("  plan %lld: execute failed\n", (long long)i);
            continue;
          }
          const int reps = 20;
          cudaEventRecord(e0);
          for (int r = 0; r < reps; ++r) (void)g->execute_plan_at_index(h, pack, ws, i);
          cudaEventRecord(e1);
          cudaEventSynchronize(e1);
          float ms = 0;
          cudaEventElapsedTime(&ms, e0, e1);
          const double us = ms * 1e3 / reps;
          const double tf = causal_flops * (backward ? 2.5 : 1.0) / us * 1e-6;
          std::printf("  plan %lld: %8.1f us  %4.0f TFLOP/s  workspace %lld  %s\n", (long long)i, us, tf,
                      (long long)wsz, g->get_plan_name_at_index(i, why).is_good() ? why.c_str() : "");
        }
      }
    }
  cudaError_t err = cudaDeviceSynchronize();
  std::printf("done: %s\n", cudaGetErrorString(err));
  return 0;
}
