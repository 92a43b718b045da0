// sppark's own G1 MSM and Fr NTT for BLS12-381, on data already resident on the GPU, timed for
// `snarkpipe-vs-supraseal --kernels` beside snarkpipe's kernels on the same data.
//
// Written for this crate; it only instantiates sppark's templates (its msm_t class and its NTT
// class) for BLS12-381 and times them:
// - the MSM with the host clock around msm_t::invoke, which returns the sum to the host (as
//   snarkpipe's kernel bench times its own msm_g1);
// - the forward NTT (natural order in and out, no coset) with CUDA events around the transform
//   alone, on a fresh copy of the input each run, so the last run's output is the transform of
//   the input and can be compared with snarkpipe's.
//
// supraseal-c2's object, linked into the same binary, already defines sppark's one non-template
// kernel that pippenger.cuh pulls in (msm/sort.cuh's `sort`), so this file declares it only
// (__MSM_SORT_DONT_IMPLEMENT__, the switch sort.cuh offers for this); template kernels may be
// instantiated in both objects.

#define __MSM_SORT_DONT_IMPLEMENT__

#include <chrono>

#include <ff/bls12-381.hpp>
#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>

typedef jacobian_t<fp_t> point_t;
typedef xyzz_t<fp_t> bucket_t;
typedef bucket_t::affine_t affine_t;
typedef fr_t scalar_t;

#include <msm/pippenger.cuh>
#include <ntt/ntt.cuh>

// The Rust side passes blstrs' G1Affine (blst_p1_affine) and Scalar (blst_fr) as these.
static_assert(sizeof(affine_t) == 96, "sppark's affine G1 point is two 48-byte coordinates");
static_assert(sizeof(point_t::affine_t) == 96, "sppark's affine G1 point is two 48-byte coordinates");
static_assert(sizeof(scalar_t) == 32, "sppark's fr_t is four 64-bit limbs");

#ifndef __CUDA_ARCH__

namespace {

// NTT_internal is protected: sppark's classes that work on device data derive from NTT.
struct resident_ntt : public NTT {
    static void forward(fr_t* d_data, uint32_t lg_n, stream_t& stream)
    {
        NTT_internal(d_data, lg_n, InputOutputOrder::NN, Direction::forward, Type::standard, stream);
    }
};

RustError from_exception(const cuda_error& e)
{
#ifdef TAKE_RESPONSIBILITY_FOR_ERROR_MESSAGE
    return RustError{e.code(), e.what()};
#else
    return RustError{e.code()};
#endif
}

} // namespace

// sum <- Σ scalars[i]·points[i], i < n. The points (affine, Montgomery, 96 bytes each) and the
// scalars (Montgomery) are copied to the device first, untimed; one MSM runs untimed, then
// `runs` MSMs are timed, the i-th taking ms[i] milliseconds. The sum comes back in affine form
// (the point at infinity as (0, 0)).
extern "C" RustError::by_value peer_sppark_msm_g1(const affine_t* points, const scalar_t* scalars,
                                                  size_t n, size_t runs, double* ms,
                                                  point_t::affine_t* sum)
{
    try {
        const gpu_t& gpu = select_gpu(0);
        dev_ptr_t<affine_t> d_points{n};
        dev_ptr_t<scalar_t> d_scalars{n};
        gpu[0].HtoD(&d_points[0], points, n);
        gpu[0].HtoD(&d_scalars[0], scalars, n);
        gpu[0].sync();

        msm_t<bucket_t, point_t, affine_t, scalar_t> msm{nullptr, n};
        point_t out;
        for (size_t run = 0; run <= runs; run++) {
            auto started = std::chrono::steady_clock::now();
            RustError err = msm.invoke(out, d_points, n, d_scalars, true);
            auto elapsed = std::chrono::steady_clock::now() - started;
            if (err.code != cudaSuccess)
                return err;
            if (run > 0)
                ms[run - 1] = std::chrono::duration<double, std::milli>(elapsed).count();
        }
        *sum = out;
        return RustError{cudaSuccess};
    } catch (const cuda_error& e) {
        return from_exception(e);
    }
}

// data[k] <- Σ_i data[i]·ω^(ik) over the 2^lg_n values of `data` (Montgomery form), ω sppark's
// root of unity of that order. The input is copied to the device once; each of 1 + `runs`
// transforms starts from a fresh device copy of it; the i-th timed one takes ms[i]
// milliseconds by CUDA events. The last output is copied back into `data`.
extern "C" RustError::by_value peer_sppark_ntt_forward(fr_t* data, uint32_t lg_n, size_t runs,
                                                       float* ms)
{
    if (lg_n == 0 || lg_n > MAX_LG_DOMAIN_SIZE)
        return RustError{cudaErrorInvalidValue, "domain size out of sppark's range"};
    cudaEvent_t start = nullptr, stop = nullptr;
    try {
        const gpu_t& gpu = select_gpu(0);
        stream_t& stream = gpu[0];
        size_t n = (size_t)1 << lg_n;
        dev_ptr_t<fr_t> d_input{n};
        dev_ptr_t<fr_t> d_work{n};
        stream.HtoD(&d_input[0], data, n);
        CUDA_OK(cudaEventCreate(&start));
        CUDA_OK(cudaEventCreate(&stop));
        for (size_t run = 0; run <= runs; run++) {
            CUDA_OK(cudaMemcpyAsync(&d_work[0], &d_input[0], n * sizeof(fr_t),
                                    cudaMemcpyDeviceToDevice, stream));
            CUDA_OK(cudaEventRecord(start, stream));
            resident_ntt::forward(&d_work[0], lg_n, stream);
            CUDA_OK(cudaEventRecord(stop, stream));
            CUDA_OK(cudaEventSynchronize(stop));
            if (run > 0)
                CUDA_OK(cudaEventElapsedTime(&ms[run - 1], start, stop));
        }
        stream.DtoH(data, &d_work[0], n);
        stream.sync();
        (void)cudaEventDestroy(start);
        (void)cudaEventDestroy(stop);
        return RustError{cudaSuccess};
    } catch (const cuda_error& e) {
        if (start) (void)cudaEventDestroy(start);
        if (stop) (void)cudaEventDestroy(stop);
        return from_exception(e);
    }
}

#endif
