//! The architecture as the source states it: the top-level modules of `src/` depend on each
//! other in one direction only (no cycle in the graph of their `crate::x` uses, tests inside
//! `src/` included), and `unsafe` code stays in the CUDA backend.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;
use common::rust_files;

/// The source without its comments (line comments and doc comments), so that a doc link is
/// not taken for a dependency.
fn without_comments(source: &str) -> String {
    source.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The identifiers named right after each `crate::`, including every first segment of a
/// `crate::{a::b, c}` group.
fn crate_roots(source: &str) -> BTreeSet<String> {
    let ident = |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let mut roots = BTreeSet::new();
    for (at, _) in source.match_indices("crate::") {
        let rest = &source[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split on commas at brace depth 0.
            let (mut depth, mut item_start) = (0usize, 0usize);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        roots.insert(ident(group[item_start..i].trim_start()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        roots.insert(ident(group[item_start..i].trim_start()));
                        item_start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            roots.insert(ident(rest));
        }
    }
    roots
}

/// Module → the other top-level modules it uses.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap();
        let top = relative.components().next().unwrap().as_os_str().to_string_lossy();
        let top = top.trim_end_matches(".rs").to_string();
        if !modules.contains(&top) {
            continue;
        }
        let source = without_comments(&std::fs::read_to_string(&file).unwrap());
        for root in crate_roots(&source) {
            if root != top && modules.contains(&root) {
                graph.get_mut(&top).unwrap().insert(root);
            }
        }
    }
    graph
}

/// A cycle of the graph, if it has one (depth-first search).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn top_level_modules_depend_on_each_other_in_one_direction() {
    let graph = module_graph(&src());
    for (module, uses) in &graph {
        println!("{module} -> {uses:?}");
    }
    // The graph is read from the real tree: the layers that must exist do.
    assert!(graph["actors"].contains("backend"), "the parser missed `crate::backend` uses in actors");
    assert!(graph["prover"].contains("actors"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!("the modules of src/ depend on each other in a cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    // The negative twin: a back edge from the bottom layer to the top closes a cycle.
    let mut graph = module_graph(&src());
    graph.get_mut("plan").unwrap().insert("prover".to_string());
    let cycle = find_cycle(&graph).expect("plan -> prover -> ... -> plan is a cycle");
    assert_eq!(cycle.first(), cycle.last());
    // And the parser reads grouped and nested uses.
    let roots = crate_roots("use crate::{backend::{Device, cpu}, plan::x, Error};\nlet y = crate::math::ntt(z);");
    assert_eq!(roots, ["Error", "backend", "math", "plan"].map(String::from).into_iter().collect());
}

#[test]
fn unsafe_code_stays_in_the_cuda_backend() {
    let cuda = src().join("backend").join("cuda");
    let mut outside = Vec::new();
    for file in rust_files(&src()) {
        let source = without_comments(&std::fs::read_to_string(&file).unwrap());
        if !file.starts_with(&cuda)
            && (source.contains("unsafe {") || source.contains("unsafe fn") || source.contains("unsafe impl"))
        {
            outside.push(file.display().to_string());
        }
    }
    assert!(outside.is_empty(), "unsafe code outside src/backend/cuda: {outside:?}");
}

#[test]
fn the_documents_link_only_to_files_that_exist() {
    // docs/check-links.py: every relative link and every cited raw output must exist.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut documents: Vec<PathBuf> =
        ["README.md", "BENCHMARKS.md", "actors.md", "kernels/NOTES.md"].iter().map(|d| root.join(d)).collect();
    for dir in ["docs", "docs/history"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                documents.push(path);
            }
        }
    }
    let output = std::process::Command::new("python3")
        .arg(root.join("docs/check-links.py"))
        .args(&documents)
        .output()
        .expect("python3 runs docs/check-links.py");
    let report = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "broken links:\n{report}");
    assert!(report.contains(" 0 broken"), "{report}");
}

/// The places in `source` (comments removed) that name a lock which poisons on panic: a
/// `std::sync::Mutex` or `RwLock` by path, or in a `std::sync::{..}` group however its lines
/// are split (nested groups included), and `lock().unwrap()`, the sign of one in use. The
/// source is read as a whole, not line by line, so an import spread over several lines is
/// seen as one.
fn poisoning_locks_in(source: &str) -> Vec<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let names_lock = |text: &str| text.split(|c: char| !is_ident(c)).any(|w| w == "Mutex" || w == "RwLock");
    // The group that opens right after `text`'s `{`, up to its matching `}`.
    let group = |text: &str| -> String {
        let mut depth = 1usize;
        let end = text
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(text.len(), |(i, _)| i);
        text[..end].to_string()
    };
    // Whitespace next to a path's or a group's punctuation goes, and any other run of it is
    // one space: a path or a group split over lines reads as one, and words stay apart.
    let code = without_comments(source).split_whitespace().collect::<Vec<_>>().join(" ");
    let punctuation = |c: Option<char>| c.is_some_and(|c| ":{},;()".contains(c));
    let chars: Vec<char> = code.chars().collect();
    let squeezed: String = chars
        .iter()
        .enumerate()
        .filter(|&(i, &c)| {
            c != ' ' || !(punctuation(i.checked_sub(1).map(|j| chars[j])) || punctuation(chars.get(i + 1).copied()))
        })
        .map(|(_, &c)| c)
        .collect();
    // What follows each `sync::` of std: `std::sync::...`, or `sync::...` inside `std::{..}`.
    let mut tails: Vec<String> = Vec::new();
    for (at, _) in squeezed.match_indices("std::") {
        // `std::` must not be the tail of a longer path.
        if squeezed[..at].ends_with(|c: char| is_ident(c) || c == ':') {
            continue;
        }
        let rest = &squeezed[at + "std::".len()..];
        if let Some(sync) = rest.strip_prefix("sync::") {
            tails.push(sync.to_string());
        } else if let Some(inner) = rest.strip_prefix('{') {
            let inner = group(inner);
            for (at, _) in inner.match_indices("sync::") {
                if at == 0 || inner[..at].ends_with([',', '{']) {
                    tails.push(inner[at + "sync::".len()..].to_string());
                }
            }
        }
    }
    let mut found = Vec::new();
    for tail in tails {
        let named = match tail.strip_prefix('{') {
            Some(inner) => group(inner),
            None => tail[..tail.find(|c: char| !is_ident(c)).unwrap_or(tail.len())].to_string(),
        };
        if names_lock(&named) {
            found.push(format!("std::sync::{named}"));
        }
    }
    found.extend(squeezed.match_indices("lock().unwrap()").map(|(_, m)| m.to_string()));
    found
}

#[test]
fn the_prover_uses_no_poisoning_locks() {
    // A panic while a std lock is held poisons it, and every later partition fails: the
    // failure mode of bellperson's GPU lock. The crate uses parking_lot only, backends included.
    let mut offenders = Vec::new();
    for file in rust_files(&src()) {
        for found in poisoning_locks_in(&std::fs::read_to_string(&file).unwrap()) {
            offenders.push(format!("{}: {found}", file.display()));
        }
    }
    assert!(offenders.is_empty(), "std locks poison on panic; use parking_lot:\n{}", offenders.join("\n"));
}

#[test]
fn the_lock_scan_sees_imports_split_over_lines() {
    // The negative twins: each of these uses a std lock, and the scan must say so.
    let caught = [
        "use std::sync::{Arc, Mutex};",
        "use std::sync::{\n    Arc,\n    Mutex,\n};",
        "use std::sync::{\n    atomic::{AtomicBool, Ordering},\n    RwLock,\n};",
        "use std::{\n    collections::HashMap,\n    sync::{Arc, Mutex},\n};",
        "let m = std::sync::\n    Mutex::new(0);",
        "let v = m.lock()\n    .unwrap();",
    ];
    for source in caught {
        assert!(!poisoning_locks_in(source).is_empty(), "the scan missed a std lock in:\n{source}");
    }
    // And what is not one stays unflagged: parking_lot, tokio's lock, a comment, atomics.
    let clean = [
        "use parking_lot::{Mutex, RwLock};",
        "use tokio::sync::Mutex;",
        "// std::sync::Mutex poisons\nuse std::sync::Arc;",
        "use std::sync::{\n    atomic::{AtomicBool, Ordering},\n    Arc,\n};",
    ];
    for source in clean {
        assert!(
            poisoning_locks_in(source).is_empty(),
            "a false alarm for:\n{source}: {:?}",
            poisoning_locks_in(source)
        );
    }
}
