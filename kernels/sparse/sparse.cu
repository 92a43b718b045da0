// Sparse matrix-vector products over Fr: a circuit's a = A·w, b = B·w, c = C·w on the device,
// from its constraint matrices made resident once per circuit shape (src/circuit/matrices.rs)
// and the assignment w = inputs ‖ aux of one partition. Orchestrated by
// src/backend/cuda/sparse.rs; the CPU reference is ConstraintMatrices::evaluate. Then the
// check that a·b = c at every constraint (sparse_first_unsatisfied, at the end; the CPU
// reference is snarkpipe::backend::cpu::first_unsatisfied).
//
// A matrix is compressed sparse rows: row r's terms are row_starts[r]..row_starts[r + 1]
// (u64), each a column of w (u32) and an index into the coefficient table all three matrices
// share (u32). Scalars are Fr in Montgomery form with blst's limbs, as blstrs keeps them on the
// host and every other kernel reads them, so nothing here converts.
//
// One thread a row (kernels/NOTES.md says why). Table entry 0 is ONE: its multiplication is
// skipped, as the reference skips it, and the sum is exactly the reference's (field addition
// is associative, so the order of the terms does not matter, but it is the same order anyway).
#include "../ff/bls12_381.cuh"

// 32-byte elements as two 16-byte loads: fr_t alone is only 4-byte aligned, which would split a
// load into eight. The matrices' sections and the assignment buffers are 256-byte aligned.
__device__ __forceinline__ fr_t sparse_load_fr(const fr_t* p) {
    const uint4* v = reinterpret_cast<const uint4*>(p);
    uint4 a = __ldg(v), b = __ldg(v + 1);
    fr_t r;
    r.l[0] = a.x; r.l[1] = a.y; r.l[2] = a.z; r.l[3] = a.w;
    r.l[4] = b.x; r.l[5] = b.y; r.l[6] = b.z; r.l[7] = b.w;
    return r;
}
__device__ __forceinline__ void sparse_store_fr(fr_t* p, const fr_t& x) {
    uint4* v = reinterpret_cast<uint4*>(p);
    v[0] = make_uint4(x.l[0], x.l[1], x.l[2], x.l[3]);
    v[1] = make_uint4(x.l[4], x.l[5], x.l[6], x.l[7]);
}

// out[r] = Σ table[coefficients[k]] · w[columns[k]] over row r's terms, for r < num_rows, and
// out[r] = 0 for num_rows <= r < out_len (the domain's padding, as an upload leaves it).
// w[j] is inputs[j] for j < num_inputs, else aux[j - num_inputs].
//
// The matrices come from a checked ConstraintMatrices, so row ranges lie within the
// num_terms terms, every column is below num_inputs + num_aux and every coefficient index below
// table_len. The kernel still checks all three, because a buffer overwritten by other work
// would otherwise read out of bounds (a sticky error that takes the whole context down): a row
// or term out of range is not added, and sets *bad so that the host reports the matrices as
// corrupt instead of returning the sums.
extern "C" __global__ void sparse_evaluate_rows(const unsigned long long* __restrict__ row_starts,
                                                const unsigned int* __restrict__ columns,
                                                const unsigned int* __restrict__ coefficients,
                                                u32 num_rows,
                                                unsigned long long num_terms,
                                                const fr_t* __restrict__ table,
                                                u32 table_len,
                                                const fr_t* __restrict__ inputs,
                                                u32 num_inputs,
                                                const fr_t* __restrict__ aux,
                                                u32 num_aux,
                                                fr_t* __restrict__ out,
                                                u32 out_len,
                                                u32* __restrict__ bad)
{
    const u32 r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= out_len)
        return;
    fr_t sum = fr_t::zero();
    if (r < num_rows) {
        unsigned long long start = row_starts[r], end = row_starts[r + 1];
        const unsigned long long num_variables = (unsigned long long)num_inputs + num_aux;
        bool out_of_range = start > end || end > num_terms;
        if (out_of_range)
            end = start;
        for (unsigned long long k = start; k < end; k++) {
            const u32 column = __ldg(columns + k), coefficient = __ldg(coefficients + k);
            if (column >= num_variables || coefficient >= table_len) {
                out_of_range = true;
                continue;
            }
            // Selecting the pointer, not the value, keeps this a single load either way.
            const fr_t* v = column < num_inputs ? inputs + column : aux + (column - num_inputs);
            fr_t value = sparse_load_fr(v);
            if (coefficient != 0)
                value = value * sparse_load_fr(table + coefficient);
            sum += value;
        }
        if (out_of_range)
            atomicOr(bad, 1u);
    }
    sparse_store_fr(out + r, sum);
}

// The first constraint i < n at which a[i]·b[i] ≠ c[i], written to *first, which the host sets
// to 0xffffffff ("none") before the launch: every witness's check, on its constraints'
// evaluations before the quotient overwrites them. Each failing element lowers *first with
// atomicMin, so the answer is the smallest failing index whatever order the blocks run in.
// Values are Fr in Montgomery form, fully reduced (blstrs keeps them so, and the product is
// reduced below r), so equal field elements have equal limbs.
extern "C" __global__ void sparse_first_unsatisfied(const fr_t* __restrict__ a,
                                                    const fr_t* __restrict__ b,
                                                    const fr_t* __restrict__ c,
                                                    u32 n,
                                                    u32* __restrict__ first)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (sparse_load_fr(a + i) * sparse_load_fr(b + i) != sparse_load_fr(c + i))
            atomicMin(first, (u32)i);
    }
}
