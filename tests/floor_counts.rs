//! The bench's floor counts what the MSM kernels' point formulas really perform: the harness
//! `lab/harness/op_count.cpp` runs the formulas of `kernels/ec/xyzz.cuh` on the host through
//! the kernels' own field code, counting every Fp multiplication and squaring, and the floor's
//! constants must equal what it counts. A formula changed in the kernels (or a floor constant
//! typed in) fails here. Needs a host C++ compiler (`CXX`, or `g++`).

use std::collections::BTreeMap;
use std::process::Command;

use snarkpipe::bench::floor::{FpOps, G1_MADD, G2_MADD};

/// The harness's counts: (group, formula) → operations.
fn counted() -> BTreeMap<(String, String), FpOps> {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("op_count");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/lab/harness/op_count.cpp");
    let built = Command::new(&cxx)
        .args(["-O1", "-std=c++17", "-o"])
        .arg(&exe)
        .arg(source)
        .output()
        .unwrap_or_else(|e| panic!("running {cxx} (set CXX to a C++17 compiler): {e}"));
    assert!(built.status.success(), "{cxx} failed: {}", String::from_utf8_lossy(&built.stderr));
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let mut counts = BTreeMap::new();
    for line in String::from_utf8(run.stdout).unwrap().lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [group, formula, muls, sqrs] = fields[..] else { panic!("an unexpected line: {line}") };
        let number = |field: &str, name: &str| -> u32 {
            field.strip_prefix(name).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{line}"))
        };
        let ops = FpOps { muls: number(muls, "muls="), sqrs: number(sqrs, "sqrs=") };
        counts.insert((group.to_string(), formula.to_string()), ops);
    }
    counts
}

#[test]
fn the_floor_counts_what_the_kernels_formulas_perform() {
    let counts = counted();
    let get = |group: &str, formula: &str| counts[&(group.to_string(), formula.to_string())];
    assert_eq!(get("g1", "madd"), G1_MADD, "the floor's G1 mixed addition is not the kernel's");
    assert_eq!(get("g2", "madd"), G2_MADD, "the floor's G2 mixed addition is not the kernel's");
    // The EFD's counts for the XYZZ formulas (a = 0): madd-2008-s 8M + 2S, add-2008-s
    // 12M + 2S, dbl-2008-s-1 6M + 3S; on G2 each Fp2 multiplication is 3 Fp multiplications
    // and each Fp2 squaring 2.
    assert_eq!(get("g1", "add"), FpOps { muls: 12, sqrs: 2 });
    assert_eq!(get("g1", "dbl"), FpOps { muls: 6, sqrs: 3 });
    assert_eq!(get("g2", "add"), FpOps { muls: 12 * 3 + 2 * 2, sqrs: 0 });
    assert_eq!(get("g2", "dbl"), FpOps { muls: 6 * 3 + 3 * 2, sqrs: 0 });
    // The negative twin: the Jacobian mixed addition (madd-2007-bl, 7M + 4S) counts otherwise,
    // so the counter tells formulas apart and the floor is not the Jacobian's.
    assert_eq!(get("g1", "jacobian-madd"), FpOps { muls: 7, sqrs: 4 });
    assert_ne!(get("g1", "jacobian-madd"), G1_MADD);
    assert_eq!(get("g2", "jacobian-madd"), FpOps { muls: 7 * 3 + 4 * 2, sqrs: 0 });
}
