// The MSM's bucket phase (step 5 of msm.cu), in a header so that kernel files built with other
// field and point-operation settings (g1_buckets_*.cu: inlined Fp multiplications, relaxed Fp)
// instantiate the same loop. Whatever the settings, the points it stores are canonical.
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
// fix-up adds into the MSM's buckets. (Adding there instead costs this loop 20% more registers
// and an H200 10% of its speed.)
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
                if (owner) buckets[key] = acc.canonical(); else spills[t] = acc.canonical();
                owner = true;
                do { end = ends[++key]; } while (end == e);  // skip empty buckets
                acc = xyzz_t<F>::from_affine(p);
            } else {
                acc = acc.add_affine(p);
            }
        }
        if (owner) buckets[key] = acc.canonical(); else spills[t] = acc.canonical();
    }
}

// The bucket-phase entry point NAME over field F; BOUNDS: empty or a __launch_bounds__(...).
#define MSM_BUCKETS_KERNEL(NAME, F, BOUNDS)                                                                   \
    extern "C" __global__ void BOUNDS NAME(const affine_t<F>* bases, const u32* entries, const u32* ends, u32 nb, \
                                           u32 total, u32 chunk, xyzz_t<F>* buckets, xyzz_t<F>* spills) {      \
        bucket_chunks<F>(bases, entries, ends, nb, total, chunk, buckets, spills);                            \
    }
