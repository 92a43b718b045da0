//! The run-time compile path: every embedded kernel module compiles with NVRTC, as it would on
//! a GPU whose architecture the build has no cubin for, and the PTX holds every entry point
//! the backend looks up. It needs the NVRTC library, not a GPU (CI installs it with the
//! compiler); without the library each test says why it skipped and passes.

use snarkpipe::backend::cuda::{nvrtc_compile_embedded, nvrtc_compile_source};
use snarkpipe::Error;

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
