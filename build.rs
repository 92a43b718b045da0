//! Embeds the CUDA kernels (kernels/**/*.cu) in the crate.
//!
//! With nvcc (env NVCC, the `.cuda` venv of .ci/install-nvcc.sh, PATH, /usr/local/cuda/bin),
//! each kernel file becomes a sm_90 cubin plus compute_90 PTX. Every file's source, with its
//! `#include "..."` headers inlined, is embedded too, so that without nvcc the backend compiles
//! it at run time with NVRTC. A missing nvcc is a warning unless SNARKPIPE_REQUIRE_NVCC=1 (CI).
//!
//! It also generates the daemon's gRPC code from proto/snarkpipe.proto (its own service) and
//! proto/cuzk.proto (the contract Curio speaks), parsed by protox (pure Rust), so no system
//! `protoc` is needed.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

fn main() {
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=SNARKPIPE_REQUIRE_NVCC");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let require = env::var("SNARKPIPE_REQUIRE_NVCC").is_ok_and(|v| v == "1");
    let nvcc = find_nvcc();
    if nvcc.is_none() {
        let msg = "nvcc not found: CUDA kernels will be compiled at run time with NVRTC";
        if require {
            panic!("SNARKPIPE_REQUIRE_NVCC=1 but {msg}");
        }
        println!("cargo:warning={msg}");
    }

    let mut sources = Vec::new();
    collect_cu(Path::new("kernels"), &mut sources);
    sources.sort();
    let mut table = String::from("&[\n");
    for src in &sources {
        let name = src.file_stem().unwrap().to_string_lossy().into_owned();
        let flat = out.join(format!("{name}.cu"));
        fs::write(&flat, inline_includes(src, &mut Vec::new())).expect("writing flattened kernel source");
        let (mut cubin, mut ptx) = ("None".to_string(), "None".to_string());
        if let Some(nvcc) = &nvcc {
            let c = out.join(format!("{name}.cubin"));
            let p = out.join(format!("{name}.ptx"));
            let ok = run_nvcc(nvcc, &["-arch=sm_90", "-cubin"], src, &c)
                && run_nvcc(nvcc, &["-arch=compute_90", "-ptx"], src, &p);
            if ok {
                cubin = format!("Some(include_bytes!({:?}))", c.display().to_string());
                ptx = format!("Some(include_str!({:?}))", p.display().to_string());
            } else if require {
                panic!("nvcc failed to compile {}", src.display());
            } else {
                println!("cargo:warning=nvcc failed on {}: falling back to NVRTC for it", src.display());
            }
        }
        table += &format!(
            "    EmbeddedModule {{ name: {name:?}, cubin_sm90: {cubin}, ptx: {ptx}, source: include_str!({:?}) }},\n",
            flat.display().to_string()
        );
    }
    table += "]\n";
    fs::write(out.join("kernels.rs"), table).expect("writing kernels.rs");
    compile_proto();
}

/// The daemon's messages, servers and clients (`snarkpipe.v1.rs` and `cuzk.v1.rs` in OUT_DIR).
fn compile_proto() {
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(["snarkpipe.proto", "cuzk.proto"], ["proto"])
        .unwrap_or_else(|e| panic!("proto/snarkpipe.proto or proto/cuzk.proto: {e}"));
    tonic_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)
        .expect("generating the daemon's gRPC code");
}

fn find_nvcc() -> Option<PathBuf> {
    if let Some(p) = env::var_os("NVCC") {
        return Some(PathBuf::from(p));
    }
    let venv = fs::read_dir(".cuda/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("site-packages/nvidia/cu13/bin/nvcc"));
    let path = env::var_os("PATH").map(|p| env::split_paths(&p).map(|d| d.join("nvcc")).collect::<Vec<_>>());
    venv.chain(path.unwrap_or_default()).chain([PathBuf::from("/usr/local/cuda/bin/nvcc")]).find(|p| p.is_file())
}

fn collect_cu(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_cu(&path, out);
        } else if path.extension().is_some_and(|e| e == "cu") {
            out.push(path);
        }
    }
}

fn run_nvcc(nvcc: &Path, mode: &[&str], src: &Path, dst: &Path) -> bool {
    let status = Command::new(nvcc).args(mode).args(["-std=c++17", "-o"]).arg(dst).arg(src).status();
    matches!(status, Ok(s) if s.success())
}

/// The source with each `#include "x"` replaced by x's text (once per file), for NVRTC.
fn inline_includes(path: &Path, seen: &mut Vec<PathBuf>) -> String {
    let path = path.canonicalize().expect("kernel source path");
    if seen.contains(&path) {
        return String::new();
    }
    seen.push(path.clone());
    let text = fs::read_to_string(&path).expect("reading kernel source");
    let mut flat = String::new();
    for line in text.lines() {
        let include = line.trim().strip_prefix("#include \"").and_then(|r| r.strip_suffix('"'));
        match include {
            Some(rel) => flat += &inline_includes(&path.parent().unwrap().join(rel), seen),
            None if line.trim() == "#pragma once" => {}
            None => flat += line,
        }
        flat.push('\n');
    }
    flat
}
