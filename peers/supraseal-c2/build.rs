//! Adds the directory of CUDA's static runtime (libcudart_static.a) to the link search path.
//!
//! supraseal-c2 and sppark compile their kernels with nvcc through the cc crate, which asks
//! for `cudart_static` but looks for it only in a CUDA toolkit's own layout
//! (`<nvcc>/../targets/x86_64-linux/lib`). CUDA 13.0 from pip keeps it in `cu13/lib`, so
//! build-here.sh names that directory in CUDA_LIB_DIR. Without CUDA_LIB_DIR, the directories of
//! CUDA_PATH and /usr/local/cuda are tried.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=CUDA_LIB_DIR");
    println!("cargo:rerun-if-env-changed=CUDA_PATH");
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
