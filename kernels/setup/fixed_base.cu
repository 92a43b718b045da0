// Fixed-base scalar multiplication, for making test and benchmark proving keys on the GPU:
// out[i] = scalars[i]·G, from a table of byte multiples of G built on the host,
// table[w·255 + b − 1] = b·2^(8w)·G for window w < 32 and byte value 1 ≤ b ≤ 255.
// A scalar's multiple is then the sum of one table point per nonzero byte of its canonical
// form: at most 32 mixed additions, the same for every thread. Results stay Jacobian; the host
// normalises them in batches (one inversion per batch instead of one per point).
#include "../ec/jacobian.cuh"

#define SETUP_WINDOWS 32
#define SETUP_MULTIPLES 255

template <class F>
__device__ __forceinline__ void fixed_base_mul(const affine_t<F>* table, const fr_t* scalars, u32 n,
                                               jacobian_t<F>* out) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const fr_t s = scalars[i].from_mont();
        jacobian_t<F> acc = jacobian_t<F>::inf();
        for (u32 w = 0; w < SETUP_WINDOWS; w++) {
            const u32 byte = (s.l[w >> 2] >> ((w & 3) * 8)) & 0xffu;
            if (byte) acc = acc.add_affine(table[w * SETUP_MULTIPLES + byte - 1]);
        }
        out[i] = acc;
    }
}

extern "C" __global__ void setup_g1_fixed_base(const affine_t<fp_t>* table, const fr_t* scalars, u32 n,
                                               jacobian_t<fp_t>* out) {
    fixed_base_mul<fp_t>(table, scalars, n, out);
}

extern "C" __global__ void setup_g2_fixed_base(const affine_t<fp2_t>* table, const fr_t* scalars, u32 n,
                                               jacobian_t<fp2_t>* out) {
    fixed_base_mul<fp2_t>(table, scalars, n, out);
}
