//! The run-time compile path: every embedded kernel module compiles with NVRTC, as it would on
//! a GPU whose architecture the build has no cubin for, and the PTX holds every entry point
//! the backend looks up. It needs the NVRTC library, not a GPU (CI installs it with the
//! compiler); without the library each test says why it skipped and passes.

use snarkpipe::backend::cuda::{
    nvrtc_compile_cached, nvrtc_compile_embedded, nvrtc_compile_source, CacheOutcome, KernelCache, KernelSource,
};
use snarkpipe::Error;

mod common;

fn available<T>(outcome: &snarkpipe::Result<T>) -> bool {
    if let Err(Error::BackendUnavailable(why)) = outcome {
        println!("skipped: {why}");
        return false;
    }
    true
}

#[test]
fn every_kernel_module_compiles_with_nvrtc_for_hopper_and_ampere() {
    for cc in [(9, 0), (8, 0)] {
        let outcome = nvrtc_compile_embedded(cc);
        if !available(&outcome) {
            return;
        }
        let modules = outcome.unwrap_or_else(|err| panic!("NVRTC failed for sm_{}{}: {err}", cc.0, cc.1));
        assert!(modules.len() >= 3, "too few kernel modules: {}", modules.len());
        for (name, ptx, entries) in modules {
            let target = format!(".target sm_{}{}", cc.0, cc.1);
            assert!(ptx.contains(&target), "{name}: PTX not for {target}");
            for entry in entries {
                assert!(ptx.contains(&format!(".entry {entry}(")), "{name}: no entry point {entry} in the PTX");
            }
        }
    }
}

#[test]
fn a_source_that_does_not_compile_is_a_device_error_with_nvrtc_s_log() {
    let good = nvrtc_compile_source("good", "extern \"C\" __global__ void k(int* x) { *x = 1; }", (9, 0));
    if !available(&good) {
        return;
    }
    assert!(good.unwrap().contains(".entry k("));
    let bad = nvrtc_compile_source("bad", "extern \"C\" __global__ void k(int* x) { *x = undeclared; }", (9, 0));
    match bad {
        Err(Error::Device { operation, message, .. }) => {
            assert_eq!(operation, "compile kernels with NVRTC");
            assert!(message.contains("bad") && message.contains("undeclared"), "{message}");
        }
        other => panic!("expected a device error, got {other:?}"),
    }
}

/// What NVRTC compiled is kept for the next process, as machine code: the first compile of a
/// module is a cubin (an ELF image for sm_90, holding the kernel's name), the second through the
/// same cache directory is read, not compiled, and is the same bytes; another source, or
/// another architecture, is compiled. The cache's own checks (damaged and foreign files) are
/// unit tests of the module.
#[test]
fn nvrtc_output_is_read_back_from_the_kernel_cache_as_a_cubin() {
    let dir = tempfile::tempdir().unwrap();
    let source = "extern \"C\" __global__ void k_cached(int* x) { *x = 7; }";
    let first = nvrtc_compile_cached(&KernelCache::at(dir.path()), "cached", source, (9, 0));
    if !available(&first) {
        return;
    }
    let (cubin, outcome) = first.unwrap();
    assert_eq!(outcome, CacheOutcome::Compiled);
    assert_eq!(&cubin[..4], b"\x7fELF", "not a cubin");
    assert!(cubin.windows(8).any(|w| w == b"k_cached"), "the kernel is not in the cubin");
    let again = nvrtc_compile_cached(&KernelCache::at(dir.path()), "cached", source, (9, 0)).unwrap();
    assert_eq!(again, (cubin.clone(), CacheOutcome::Hit));
    let other = source.replace('7', "8");
    let (other_cubin, outcome) = nvrtc_compile_cached(&KernelCache::at(dir.path()), "cached", &other, (9, 0)).unwrap();
    assert_eq!(outcome, CacheOutcome::Compiled);
    assert_ne!(other_cubin, cubin);
    let (ampere, outcome) = nvrtc_compile_cached(&KernelCache::at(dir.path()), "cached", source, (8, 0)).unwrap();
    assert_eq!(outcome, CacheOutcome::Compiled);
    assert_ne!(ampere, cubin, "an sm_80 cubin equal to the sm_90 one");
}

/// `SNARKPIPE_KERNELS` names where a GPU's kernels come from; anything else is refused with
/// the accepted values, before any GPU is opened.
#[test]
fn the_forced_kernel_source_is_one_of_three() {
    assert_eq!(KernelSource::forced(None).unwrap(), None);
    assert_eq!(KernelSource::forced(Some("")).unwrap(), None);
    assert_eq!(KernelSource::forced(Some("nvrtc")).unwrap(), Some(KernelSource::Nvrtc));
    assert_eq!(KernelSource::forced(Some("ptx")).unwrap(), Some(KernelSource::Ptx));
    assert_eq!(KernelSource::forced(Some("cubin")).unwrap(), Some(KernelSource::Cubin));
    let err = KernelSource::forced(Some("NVRTC ")).unwrap_err();
    assert!(matches!(err, Error::Config(_)) && err.to_string().contains("cubin, ptx or nvrtc"), "{err}");
}

/// On a GPU: the kernels loaded from the build's PTX (as on a GPU newer than sm_90) and from
/// NVRTC (as on one the build has no code for) compute what the CPU computes. Skips without a
/// GPU.
#[test]
fn kernels_loaded_from_ptx_and_from_nvrtc_match_the_cpu_on_a_gpu() {
    use blstrs::{G1Projective, Scalar};
    use ff::Field;
    use group::{Curve, Group};
    use snarkpipe::backend::cuda::{GpuContext, KernelSource, MsmOptions};

    if !common::have_gpu() {
        return;
    }
    let mut rng = common::fresh_rng();
    let n = 3000;
    let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let projective: Vec<G1Projective> = (0..n).map(|_| G1Projective::random(&mut rng)).collect();
    let mut points = vec![blstrs::G1Affine::default(); n];
    G1Projective::batch_normalize(&projective, &mut points);
    let expected = snarkpipe::math::msm::msm_g1(&points, &scalars);
    let log_n = 12;
    let mut evaluations: Vec<Scalar> = (0..1usize << log_n).map(|_| Scalar::random(&mut rng)).collect();
    let domain = snarkpipe::math::domain::Domain::from_log_n(log_n).unwrap();
    let coefficients = evaluations.clone();
    snarkpipe::math::ntt::ntt(&mut evaluations, domain);

    for source in [KernelSource::Ptx, KernelSource::Nvrtc] {
        let ctx = GpuContext::open_from(0, source).unwrap_or_else(|err| panic!("loading from {source:?}: {err}"));
        assert_eq!(ctx.kernel_source(), source);
        let s = ctx.new_stream().unwrap();
        let msm = s.msm_g1(&s.upload(&points).unwrap(), &s.upload(&scalars).unwrap(), n, MsmOptions::default());
        assert_eq!(msm.unwrap().to_affine(), expected.to_affine(), "MSM with kernels from {source:?}");
        // The negative twin: one scalar changed changes the sum.
        let mut changed = scalars.clone();
        changed[n / 2] += Scalar::ONE;
        let other = s.msm_g1(&s.upload(&points).unwrap(), &s.upload(&changed).unwrap(), n, MsmOptions::default());
        assert_ne!(other.unwrap().to_affine(), expected.to_affine());
        let mut on_device = s.upload(&coefficients).unwrap();
        s.ntt_forward(&mut on_device, log_n).unwrap();
        assert_eq!(s.download(&on_device).unwrap(), evaluations, "NTT with kernels from {source:?}");
        println!("{source:?}: MSM of {n} and NTT of 2^{log_n} match the CPU");
    }
}
