//! 1. Compiles cuda/sppark_kernels.cu (sppark's own MSM and NTT for `--kernels`) with sppark's
//!    build helper, as supraseal-c2 compiles its own CUDA, with the same defines.
//! 2. Adds the directory of CUDA's static runtime (libcudart_static.a) to the link search path:
//!    the cc crate asks for `cudart_static` but looks for it only in a CUDA toolkit's own layout
//!    (`<nvcc>/../targets/x86_64-linux/lib`). CUDA 13.0 from pip keeps it in `cu13/lib`, so
//!    build-here.sh names that directory in CUDA_LIB_DIR. Without CUDA_LIB_DIR, the directories
//!    of CUDA_PATH and /usr/local/cuda are tried.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-env-changed=CUDA_LIB_DIR");
    println!("cargo:rerun-if-env-changed=CUDA_PATH");

    let mut nvcc = sppark::build::ccmd();
    nvcc.define("FEATURE_BLS12_381", None);
    // supraseal-c2's build script defines __ADX__ on the same condition; host code inlined in
    // both objects must be compiled alike.
    #[cfg(target_arch = "x86_64")]
    if env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "x86_64") && std::is_x86_feature_detected!("adx") {
        nvcc.define("__ADX__", None);
    }
    nvcc.file("cuda/sppark_kernels.cu").compile("peer_sppark_kernels");

    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = env::var_os("CUDA_LIB_DIR") {
        candidates.push(dir.into());
    }
    if let Some(cuda) = env::var_os("CUDA_PATH") {
        let cuda = PathBuf::from(cuda);
        candidates.extend([cuda.join("lib"), cuda.join("lib64"), cuda.join("targets/x86_64-linux/lib")]);
    }
    candidates.push("/usr/local/cuda/lib64".into());
    match candidates.iter().find(|dir| dir.join("libcudart_static.a").is_file()) {
        Some(dir) => println!("cargo:rustc-link-search=native={}", dir.display()),
        None => println!(
            "cargo:warning=libcudart_static.a not found in {candidates:?}: set CUDA_LIB_DIR (build-here.sh does)"
        ),
    }
}
