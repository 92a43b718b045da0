// Picks a query's scalars out of the aux assignment already on the device, so the host
// uploads the assignment once instead of once more per query (see src/circuit/packed.rs).
//
// Variable i is used when bit i % 32 of words[i / 32] is set; its place in the output is
// taken_before[i / 32] plus the used bits below it in its word. Scalars are moved as raw
// 32-byte values (their Montgomery form is never looked at).

// No headers: NVRTC compiles this at run time without a system include path.

extern "C" __global__ void select_scalars(const uint4* __restrict__ values,
                                          const unsigned int* __restrict__ words,
                                          const unsigned int* __restrict__ taken_before,
                                          unsigned int len,
                                          uint4* __restrict__ out)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= len)
        return;
    unsigned int word = words[i >> 5];
    unsigned int bit = i & 31;
    if (((word >> bit) & 1u) == 0)
        return;
    unsigned int below = __popc(word & ((1u << bit) - 1u));
    unsigned long long place = (unsigned long long)taken_before[i >> 5] + below;
    out[2 * place] = values[2 * (unsigned long long)i];
    out[2 * place + 1] = values[2 * (unsigned long long)i + 1];
}

// A kernel that traps: the fault injector launches it to break a GPU's context for real (a
// sticky error, as an illegal address or a failed assertion would), so that the recovery
// from it is tested on the hardware. Never launched otherwise.
extern "C" __global__ void debug_trap() { asm volatile("trap;"); }
