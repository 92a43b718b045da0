// Probe of the CUDA driver: after a kernel traps (a sticky error), which way of replacing the
// context gives a process a working GPU again? Each way runs in its own process, so one way's
// leftovers cannot help or hurt another. Build and run: scripts/probes/sticky-context.sh.
#include <cuda.h>
#include <cstdio>
#include <cstring>

extern "C" __global__ void trap_kernel() { asm volatile("trap;"); }
extern "C" __global__ void add_one(int *x) { x[threadIdx.x] += 1; }

static const char *name(CUresult r) {
  const char *s = nullptr;
  cuGetErrorName(r, &s);
  return s ? s : "?";
}
#define TRY(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
  printf("  %-45s -> %s (%d)\n", #call, name(r_), (int)r_); return r_; } } while (0)

// Loads the kernels from the cubin on the current context and checks that add_one works.
static CUresult works(const char *cubin) {
  CUmodule m; CUfunction f; CUdeviceptr d; int h[32] = {0};
  TRY(cuModuleLoad(&m, cubin));
  TRY(cuModuleGetFunction(&f, m, "add_one"));
  TRY(cuMemAlloc(&d, sizeof h));
  TRY(cuMemcpyHtoD(d, h, sizeof h));
  void *args[] = {&d};
  TRY(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, args, 0));
  TRY(cuCtxSynchronize());
  TRY(cuMemcpyDtoH(h, d, sizeof h));
  for (int i = 0; i < 32; i++) if (h[i] != 1) { printf("  wrong result\n"); return CUDA_ERROR_UNKNOWN; }
  cuMemFree(d);
  cuModuleUnload(m);
  return CUDA_SUCCESS;
}

static CUresult trap(const char *cubin, CUmodule *m) {
  CUfunction f;
  TRY(cuModuleLoad(m, cubin));
  TRY(cuModuleGetFunction(&f, *m, "trap_kernel"));
  TRY(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, nullptr, 0));
  CUresult r = cuCtxSynchronize();
  printf("  trap: synchronize -> %s (%d)\n", name(r), (int)r);
  return CUDA_SUCCESS;
}

int main(int argc, char **argv) {
  if (argc < 3) { printf("usage: %s CUBIN none|release-retain|primary-reset|own-context\n", argv[0]); return 2; }
  const char *cubin = argv[1], *way = argv[2];
  CUdevice dev; CUcontext ctx; CUmodule m;
  TRY(cuInit(0));
  TRY(cuDeviceGet(&dev, 0));
  printf("way: %s\n", way);
  if (!strcmp(way, "own-context")) {
    CUctxCreateParams p; memset(&p, 0, sizeof p);
    TRY(cuCtxCreate(&ctx, &p, 0, dev));
    TRY(works(cubin));
    TRY(trap(cubin, &m));
    printf("  destroy: %s\n", name(cuCtxDestroy(ctx)));
    TRY(cuCtxCreate(&ctx, &p, 0, dev));
  } else {
    TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
    TRY(cuCtxSetCurrent(ctx));
    TRY(works(cubin));
    TRY(trap(cubin, &m));
    if (!strcmp(way, "release-retain")) {
      printf("  unload: %s\n", name(cuModuleUnload(m)));
      printf("  release: %s\n", name(cuDevicePrimaryCtxRelease(dev)));
      TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
      TRY(cuCtxSetCurrent(ctx));
    } else if (!strcmp(way, "primary-reset")) {
      printf("  unload: %s\n", name(cuModuleUnload(m)));
      printf("  reset: %s\n", name(cuDevicePrimaryCtxReset(dev)));
      TRY(cuDevicePrimaryCtxRetain(&ctx, dev));
      TRY(cuCtxSetCurrent(ctx));
    }
  }
  CUresult r = works(cubin);
  printf("  after %s: the GPU %s\n", way, r == CUDA_SUCCESS ? "WORKS" : "does not work");
  return r == CUDA_SUCCESS ? 0 : 1;
}
