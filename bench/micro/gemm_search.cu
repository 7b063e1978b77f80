// Exhaustive cuBLASLt algorithm search for the MLP GEMMs of gpt3_345m, against the heuristic
// list the engine times (kernels/cuda/cublaslt_linear.cpp). It answers: does cuBLASLt have a
// faster configuration for the GELU-epilogue GEMMs than its heuristic offers?
//   nvcc -O2 -std=c++17 -arch=sm_90 -I. bench/micro/gemm_search.cu -lcublasLt -o gemm_search
//   ./gemm_search [N=16384] [max_configs_timed=4000]
// Shapes use the engine's row-major → column-major mapping (see cublaslt_linear.cpp):
//   fc1 forward  outᵀ[4C,N] = W1ᵀ · inpᵀ    m=4C n=N k=C  TN, GELU_AUX_BIAS (aux = pre-GELU)
//   fc2 dgrad    dinpᵀ[4C,N] = W2 · doutᵀ   m=4C n=N k=C  NN, DGELU (aux = pre-GELU)
// and, for reference, the same products with plain BIAS / DEFAULT epilogues.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/micro/bench_check.h"

namespace {

struct Case {
  const char* name;
  bool transA, transB;
  cublasLtEpilogue_t epilogue;
};

struct Timed {
  float us;
  int id, tile, stages, cluster, swizzle, custom, splitk;
  std::string source;
};

int cfg(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  int v = 0;
  size_t w = 0;
  uint32_t u = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &u, sizeof(u), &w) == CUBLAS_STATUS_SUCCESS) v = int(u);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 16384;
  const int max_timed = argc > 2 ? std::atoi(argv[2]) : 4000;
  const int64_t C = 1024, H = 4 * C;
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  const size_t ws_bytes = 64u << 20;
  void *ws, *A, *B, *D, *aux, *bias;
  // Largest operands: D and aux [N, 4C] bf16; inputs [N, C] and [4C, C].
  CK(cudaMalloc(&ws, ws_bytes));
  CK(cudaMalloc(&A, size_t(H) * C * 2));
  CK(cudaMalloc(&B, size_t(N) * C * 2));
  CK(cudaMalloc(&D, size_t(N) * H * 2));
  CK(cudaMalloc(&aux, size_t(N) * H * 2));
  CK(cudaMalloc(&bias, size_t(H) * 2));
  {  // random data: clocks under load depend on the bits being multiplied
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 1.f);
    auto fill = [&](void* p, size_t n, float scale) {
      std::vector<__nv_bfloat16> h(n);
      for (auto& x : h) x = __float2bfloat16(nd(rng) * scale);
      CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
    };
    fill(A, size_t(H) * C, 0.02f);
    fill(B, size_t(N) * C, 1.f);
    fill(aux, size_t(N) * H, 1.f);
    fill(bias, size_t(H), 0.1f);
  }
  const Case cases[] = {
      {"fc1 fwd GELU_AUX_BIAS", true, false, CUBLASLT_EPILOGUE_GELU_AUX_BIAS},
      {"fc1 fwd BIAS (ref)", true, false, CUBLASLT_EPILOGUE_BIAS},
      {"fc2 dgrad DGELU", false, false, CUBLASLT_EPILOGUE_DGELU},
      {"fc2 dgrad DEFAULT (ref)", false, false, CUBLASLT_EPILOGUE_DEFAULT},
  };
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const double flops = 2.0 * double(N) * double(C) * double(H);

  for (const Case& cs : cases) {
    const int64_t m = H, n = N, k = C;
    cublasLtMatmulDesc_t desc;
    CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = cs.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = cs.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &cs.epilogue, sizeof(cs.epilogue)));
    if (cs.epilogue == CUBLASLT_EPILOGUE_BIAS || cs.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
      cudaDataType_t bt = CUDA_R_16BF;
      CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
      CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (cs.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || cs.epilogue == CUBLASLT_EPILOGUE_DGELU) {
      cudaDataType_t at = CUDA_R_16BF;
      int64_t ld = m;
      CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at, sizeof(at)));
      CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
      CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, cs.transA ? k : m, cs.transA ? m : k, cs.transA ? k : m));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, cs.transB ? n : k, cs.transB ? k : n, cs.transB ? n : k));
    CK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m));
    // The fc2 dgrad's A is W2 [C, 4C] row-major = column-major [4C, C]: lda = 4C = m (as above).

    const float alpha = 1.f, beta = 0.f;
    auto time_algo = [&](const cublasLtMatmulAlgo_t& a, int reps) -> float {
      auto launch = [&] {
        return cublasLtMatmul(lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &a, ws, ws_bytes, stream);
      };
      if (launch() != CUBLAS_STATUS_SUCCESS) return -1.f;
      if (cudaStreamSynchronize(stream) != cudaSuccess) return -1.f;
      CK(cudaEventRecord(e0, stream));
      for (int r = 0; r < reps; ++r) launch();
      CK(cudaEventRecord(e1, stream));
      CK(cudaEventSynchronize(e1));
      float ms = 0.f;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      return ms * 1e3f / reps;
    };
    auto describe = [&](const cublasLtMatmulAlgo_t& a, float us, const std::string& src) {
      return Timed{us,
                   cfg(a, CUBLASLT_ALGO_CONFIG_ID),
                   cfg(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
                   cfg(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                   cfg(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
                   cfg(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                   cfg(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
                   cfg(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                   src};
    };
    std::vector<Timed> all;

    // 1. The heuristic list (what the engine times the first 8 of).
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = ws_bytes;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
    std::vector<cublasLtMatmulHeuristicResult_t> hr(64);
    int returned = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 64, hr.data(), &returned);
    float heur1 = -1.f;
    for (int i = 0; i < returned; ++i) {
      if (hr[i].state != CUBLAS_STATUS_SUCCESS) continue;
      float us = time_algo(hr[i].algo, 10);
      if (i == 0) heur1 = us;
      if (us > 0) all.push_back(describe(hr[i].algo, us, "heuristic #" + std::to_string(i + 1)));
    }
    const size_t n_heur = all.size();

    // 2. Every algorithm id × tile × stages × cluster × swizzle × custom option that checks.
    int ids[512], n_ids = 0;
    CK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                                512, ids, &n_ids));
    int checked = 0, timed = 0;
    for (int ii = 0; ii < n_ids && timed < max_timed; ++ii) {
      cublasLtMatmulAlgo_t algo;
      if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                                 ids[ii], &algo) != CUBLAS_STATUS_SUCCESS)
        continue;
      size_t w = 0;
      // Array capabilities: a first call with size 0 reports the bytes needed.
      auto cap_array = [&](cublasLtMatmulAlgoCapAttributes_t attr) {
        size_t bytes = 0;
        std::vector<uint32_t> v;
        if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS) return v;
        v.resize(bytes / 4 + 1);
        if (bytes == 0 ||
            cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS)
          bytes = 0;
        v.resize(bytes / 4);
        return v;
      };
      std::vector<uint32_t> tiles = cap_array(CUBLASLT_ALGO_CAP_TILE_IDS);
      std::vector<uint32_t> stages = cap_array(CUBLASLT_ALGO_CAP_STAGES_IDS);
      int nt = int(tiles.size()), ns = int(stages.size());
      int32_t custom_max = 0, swz = 0;
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max, sizeof(custom_max),
                                        &w);
      cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swz, sizeof(swz), &w);
      if (nt == 0) tiles = {CUBLASLT_MATMUL_TILE_UNDEFINED}, nt = 1;
      if (ns == 0) stages = {CUBLASLT_MATMUL_STAGES_UNDEFINED}, ns = 1;
      const uint32_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                   CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1};
      for (int t = 0; t < nt; ++t)
        for (int s = 0; s < ns; ++s)
          for (uint32_t cl : clusters)
            for (int sw = 0; sw <= (swz ? 1 : 0); ++sw)
              for (int co = 0; co <= std::min(custom_max, 3); ++co) {
                if (timed >= max_timed) break;
                cublasLtMatmulAlgo_t a = algo;
                uint32_t tile = tiles[t], st = stages[s];
                uint32_t swv = sw;
                uint32_t cov = co;
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile));
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &st, sizeof(st));
                if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof(cl)) !=
                        CUBLAS_STATUS_SUCCESS &&
                    cl != CUBLASLT_CLUSTER_SHAPE_AUTO)
                  continue;
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swv, sizeof(swv));
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &cov, sizeof(cov));
                cublasLtMatmulHeuristicResult_t r{};
                if (cublasLtMatmulAlgoCheck(lt, desc, la, lb, ld, ld, &a, &r) != CUBLAS_STATUS_SUCCESS) continue;
                if (r.workspaceSize > ws_bytes) continue;
                ++checked;
                float us = time_algo(a, 3);
                ++timed;
                if (us > 0) all.push_back(describe(a, us, "search"));
              }
    }
    // Re-time the 12 fastest found by the search with more repetitions.
    std::sort(all.begin() + long(n_heur), all.end(), [](const Timed& x, const Timed& y) { return x.us < y.us; });
    std::printf("\n== %s  m=%lld n=%lld k=%lld  (algo ids %d, configs checked %d, timed %d)\n", cs.name, (long long)m,
                (long long)n, (long long)k, n_ids, checked, timed);
    std::printf("heuristic #1: %.1f us = %.0f TFLOP/s\n", heur1, heur1 > 0 ? flops / heur1 * 1e-6 : 0.0);
    std::sort(all.begin(), all.begin() + long(n_heur), [](const Timed& x, const Timed& y) { return x.us < y.us; });
    auto print = [&](const Timed& t) {
      std::printf("  %-14s %8.1f us %5.0f TFLOP/s  id=%d tile=%d stages=%d cluster=%d swizzle=%d custom=%d splitk=%d\n",
                  t.source.c_str(), t.us, flops / t.us * 1e-6, t.id, t.tile, t.stages, t.cluster, t.swizzle, t.custom,
                  t.splitk);
    };
    std::printf("best of the heuristic list (%zu):\n", n_heur);
    for (size_t i = 0; i < std::min<size_t>(n_heur, 4); ++i) print(all[i]);
    std::printf("best of the search:\n");
    for (size_t i = n_heur; i < std::min(all.size(), n_heur + 8); ++i) print(all[i]);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
  }
  return 0;
}
