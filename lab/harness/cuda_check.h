// CK(call): a CUDA runtime call in the nvcc harnesses; any error ends the run with exit status 2,
// which their scripts report as a CUDA error (as opposed to 1, a mismatch).
#pragma once
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                       \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, \
                    cudaGetErrorString(e_));                                                        \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)
