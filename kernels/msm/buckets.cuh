// The MSM's bucket phase (step 5 of msm.cu): sorted entries cut into equal chunks, one thread
// per chunk.
#pragma once
#include "../ec/xyzz.cuh"

#define GRID_STRIDE(i, n) for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

template <class F>
__device__ __forceinline__ affine_t<F> load_entry(const affine_t<F>* bases, u32 ent) {
    affine_t<F> p = bases[ent & 0x7fffffffu];
    if (ent >> 31) p = p.neg();
    return p;
}

// The bucket holding sorted entry e: the first key whose end offset is past e (ends is
// non-decreasing, ends[nb - 1] = the number of entries > e).
__device__ __forceinline__ u32 bucket_of_entry(const u32* ends, u32 nb, u32 e) {
    u32 lo = 0, hi = nb - 1;
    while (lo < hi) {
        u32 mid = (lo + hi) >> 1;
        if (ends[mid] > e) hi = mid; else lo = mid + 1;
    }
    return lo;
}

// Thread t sums entries [t·chunk, (t+1)·chunk) (sorted by bucket) bucket by bucket. A bucket whose
// first entry lies in this chunk is written to buckets[key] (complete unless it runs past the
// chunk end); the partial sum of a bucket begun in an earlier chunk (only the chunk's first
// bucket can be one) goes to spills[t]. Empty buckets are never written: in the first pass
// `buckets` must be zero (infinity) beforehand; later passes write a scratch array that the
// fix-up adds into the MSM's buckets. (Adding there instead costs this loop a fifth more
// registers, and with them occupancy.)
template <class F>
__device__ __forceinline__ void bucket_chunks(const affine_t<F>* bases, const u32* entries, const u32* ends, u32 nb,
                                              u32 total, u32 chunk, xyzz_t<F>* buckets, xyzz_t<F>* spills) {
    const u32 chunks = (total + chunk - 1) / chunk;
    GRID_STRIDE(t, chunks) {
        const u32 lo = t * chunk, hi = min(lo + chunk, total);
        u32 key = bucket_of_entry(ends, nb, lo);
        bool owner = (key ? ends[key - 1] : 0) == lo;
        u32 end = ends[key];
        xyzz_t<F> acc = xyzz_t<F>::from_affine(load_entry(bases, entries[lo]));
        for (u32 e = lo + 1; e < hi; e++) {
            const affine_t<F> p = load_entry(bases, entries[e]);
            if (e == end) {
                if (owner) buckets[key] = acc; else spills[t] = acc;
                owner = true;
                do { end = ends[++key]; } while (end == e);  // skip empty buckets
                acc = xyzz_t<F>::from_affine(p);
            } else {
                acc = acc.add_affine(p);
            }
        }
        if (owner) buckets[key] = acc; else spills[t] = acc;
    }
}

// Launch bounds of the G2 bucket kernel: three blocks of 128 threads an SM (168 registers, a few
// bytes of spills). Unbounded it takes 204 registers and fits two blocks an SM, too few warps to
// hide its latency (kernels/NOTES.md has the profile and the comparison).
#ifndef MSM_G2_BUCKET_BOUNDS
#define MSM_G2_BUCKET_BOUNDS __launch_bounds__(128, 3)
#endif

// The two curves' bucket kernels under the names msm_g1_buckets<suffix>, msm_g2_buckets<suffix>.
#define MSM_BUCKET_KERNELS(SUFFIX)                                                                          \
    extern "C" __global__ void msm_g1_buckets##SUFFIX(const affine_t<fp_t>* bases, const u32* entries,      \
                                                      const u32* ends, u32 nb, u32 total, u32 chunk,          \
                                                      xyzz_t<fp_t>* buckets, xyzz_t<fp_t>* spills) {          \
        bucket_chunks<fp_t>(bases, entries, ends, nb, total, chunk, buckets, spills);                         \
    }                                                                                                         \
    extern "C" __global__ void MSM_G2_BUCKET_BOUNDS msm_g2_buckets##SUFFIX(const affine_t<fp2_t>* bases,     \
                                                                           const u32* entries,              \
                                                      const u32* ends, u32 nb, u32 total, u32 chunk,          \
                                                      xyzz_t<fp2_t>* buckets, xyzz_t<fp2_t>* spills) {        \
        bucket_chunks<fp2_t>(bases, entries, ends, nb, total, chunk, buckets, spills);                        \
    }
