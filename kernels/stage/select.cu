// Picks a query's scalars out of the aux assignment already on the device, so the host
// uploads the assignment once instead of once more per query (see src/circuit/packed.rs).
//
// Variable i is used when bit i % 32 of words[i / 32] is set; its place in the output is
// taken_before[i / 32] plus the used bits below it in its word. Scalars are moved as raw
// 32-byte values (their Montgomery form is never looked at).

#include <stdint.h>

extern "C" __global__ void select_scalars(const uint4* __restrict__ values,
                                          const uint32_t* __restrict__ words,
                                          const uint32_t* __restrict__ taken_before,
                                          uint32_t len,
                                          uint4* __restrict__ out)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= len)
        return;
    uint32_t word = words[i >> 5];
    uint32_t bit = i & 31;
    if (((word >> bit) & 1u) == 0)
        return;
    uint32_t below = __popc(word & ((1u << bit) - 1u));
    uint64_t place = (uint64_t)taken_before[i >> 5] + below;
    out[2 * place] = values[2 * (uint64_t)i];
    out[2 * place + 1] = values[2 * (uint64_t)i + 1];
}
