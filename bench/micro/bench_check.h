// Exit-on-error checks for the standalone bench tools (gemm_search.cu, fused_mlp_dgrad.cu, swiglu_bwd.cu):
// any nonzero status from a CUDA runtime, driver or cuBLASLt call prints the call, file:line and
// the code, and ends the program — these tools measure, they do not recover.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                     \
  do {                                                                            \
    auto s_ = (x);                                                                \
    if (s_ != 0) {                                                                \
      std::fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)
