// Host shims for running CUDA kernel bodies as plain C++ (the batch-affine harness's host build,
// kernels/check/batch_affine_host.cpp): a kernel is a function over a grid of one thread, so
// GRID_STRIDE visits every index in order. Kernels that never read what the same launch writes
// give the GPU's result in this order. Include before the kernels.
#pragma once
#include <algorithm>
using std::max;
using std::min;
#define __global__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
// msm.cu's dynamic shared memory: a placeholder, for kernels the host builds compile but never run
#define DYNAMIC_SHARED_U32(name) static u32 name[1]
struct ba_dim3 { unsigned x, y, z; };
static const ba_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline void __syncthreads() {}
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
static inline unsigned atomicMax(unsigned* p, unsigned v) { unsigned o = *p; *p = o > v ? o : v; return o; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
typedef void* cudaStream_t;
