//! The architecture as the source states it: the files of `src/` import each other without a
//! cycle (so neither do the top-level modules), reading through re-exports (`pub use`, at the
//! crate root and in any module) to the file that defines what is named (tests inside `src/`
//! count between top-level modules); `unsafe` code stays in the CUDA backend; and `actors.md` has one section per file
//! of `src/actors/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod common;
use common::rust_files;

/// The source without its comments (line comments and doc comments), so that a doc link is
/// not taken for a dependency.
fn without_comments(source: &str) -> String {
    source.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The source as code only: comments gone, and the contents of string and character literals
/// blanked, so that neither a doc link nor a brace inside a string is read as code.
fn code_only(source: &str) -> String {
    let c: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r' && matches!(next, Some('"' | '#')) && (i == 0 || !is_ident(c[i - 1])) {
            // A raw string `r#"…"#` (or a raw identifier `r#name`, kept).
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            while i < c.len()
                && !(c[i] == '"' && c[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes)
            {
                i += 1;
            }
            i += 1 + hashes;
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && next == Some('\\') {
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// A path as written, read from the start of `code` (`a::b::{c, d::e as f}` and so on): each
/// full path it names, with the name it is known by (its last segment, or its `as`).
fn use_tree(code: &[char]) -> Vec<(Vec<String>, String)> {
    fn skip_space(c: &[char], i: &mut usize) {
        while *i < c.len() && c[*i].is_whitespace() {
            *i += 1;
        }
    }
    fn ident(c: &[char], i: &mut usize) -> String {
        let start = *i;
        while *i < c.len() && is_ident(c[*i]) {
            *i += 1;
        }
        c[start..*i].iter().collect()
    }
    fn tree(c: &[char], i: &mut usize, prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        skip_space(c, i);
        if c.get(*i) == Some(&'{') {
            *i += 1;
            loop {
                skip_space(c, i);
                match c.get(*i) {
                    None => return,
                    Some('}') => {
                        *i += 1;
                        return;
                    }
                    Some(',') => *i += 1,
                    Some(_) => {
                        let before = *i;
                        tree(c, i, prefix.clone(), out);
                        if *i == before {
                            *i += 1;
                        }
                    }
                }
            }
        }
        if c.get(*i) == Some(&'*') {
            *i += 1;
            out.push((prefix, "*".to_string()));
            return;
        }
        let name = ident(c, i);
        if name.is_empty() {
            if let Some(last) = prefix.last().cloned() {
                out.push((prefix, last));
            }
            return;
        }
        if name == "self" && !prefix.is_empty() {
            let last = prefix.last().cloned().unwrap();
            out.push((prefix, last));
            return;
        }
        let mut path = prefix;
        path.push(name.clone());
        let mut j = *i;
        skip_space(c, &mut j);
        if c.get(j) == Some(&':') && c.get(j + 1) == Some(&':') {
            *i = j + 2;
            tree(c, i, path, out);
            return;
        }
        // `as alias`
        let mut k = j;
        if ident(c, &mut k) == "as" {
            skip_space(c, &mut k);
            let alias = ident(c, &mut k);
            *i = k;
            out.push((path, alias));
            return;
        }
        out.push((path, name));
    }
    let mut out = Vec::new();
    tree(code, &mut 0, Vec::new(), &mut out);
    out
}

/// The files of a crate, each by its module path (`""` for the crate root, `"actors::pin"`
/// for `src/actors/pin.rs` or `src/actors/pin/mod.rs`), with their source.
type Files = BTreeMap<String, String>;

/// The files of `src/` (the binary's `main.rs` is another crate).
fn source_files(src: &Path) -> Files {
    let mut files = Files::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> =
            relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if parts == ["main"] {
            continue;
        }
        if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
            parts.pop();
        }
        files.insert(parts.join("::"), std::fs::read_to_string(&file).unwrap());
    }
    files
}

fn join(module: &[String], rest: &[String]) -> Vec<String> {
    module.iter().chain(rest).cloned().collect()
}

/// What each file names: the paths it imports or writes in its code (made absolute), and the
/// re-exports it offers (name → the absolute path it stands for).
struct Names {
    /// Each with whether it is in a test module (`#[cfg(test)] mod … { }`).
    uses: Vec<(Vec<String>, bool)>,
    reexports: BTreeMap<String, Vec<String>>,
}

/// Reads what `module`'s `source` names. A path counts when it starts with `crate`, `self`,
/// `super` or a child module of the file; others are extern crates or local names. `super`
/// inside an inline module (`mod tests { use super::*; }`) is the file's own module.
fn names_in(module: &str, source: &str, files: &Files) -> Names {
    let code: Vec<char> = code_only(source).chars().collect();
    let text: String = code.iter().collect();
    let module: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
    // Inline modules: (start, end, name).
    let mut inline = Vec::new();
    for (at, _) in text.match_indices("mod ") {
        let at = text[..at].chars().count();
        if at > 0 && is_ident(code[at - 1]) {
            continue;
        }
        let mut i = at + 4;
        while i < code.len() && code[i].is_whitespace() {
            i += 1;
        }
        let start = i;
        while i < code.len() && is_ident(code[i]) {
            i += 1;
        }
        let name: String = code[start..i].iter().collect();
        while i < code.len() && code[i].is_whitespace() {
            i += 1;
        }
        if name.is_empty() || code.get(i) != Some(&'{') {
            continue;
        }
        let mut depth = 0usize;
        let mut end = code.len();
        for (j, &c) in code.iter().enumerate().skip(i) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let test =
            text[..text.char_indices().nth(at).map_or(text.len(), |(b, _)| b)].trim_end().ends_with("#[cfg(test)]");
        inline.push((i, end, name, test));
    }
    let scope_at = |at: usize| -> Vec<String> {
        let mut scope = module.clone();
        scope.extend(inline.iter().filter(|(s, e, _, _)| *s < at && at < *e).map(|(_, _, n, _)| n.clone()));
        scope
    };
    // A path as written at `at` made absolute, if it is the crate's.
    let absolute = |at: usize, path: &[String]| -> Option<Vec<String>> {
        let scope = scope_at(at);
        match path.first()?.as_str() {
            "crate" => Some(path[1..].to_vec()),
            "self" => Some(join(&scope, &path[1..])),
            "super" => {
                let supers = path.iter().take_while(|s| *s == "super").count();
                let mut base = scope.clone();
                for _ in 0..supers {
                    base.pop()?;
                }
                Some(join(&base, &path[supers..]))
            }
            child if files.contains_key(&join(&scope, &[child.to_string()]).join("::")) => Some(join(&scope, path)),
            _ => None,
        }
    };
    let in_test = |at: usize| inline.iter().any(|&(s, e, _, test)| test && s < at && at < e);
    let mut names = Names { uses: Vec::new(), reexports: BTreeMap::new() };
    // `use` statements: public ones are re-exports, the others imports.
    let mut statements = Vec::new();
    for (at, _) in text.match_indices("use ") {
        let at = text[..at].chars().count();
        if at > 0 && is_ident(code[at - 1]) {
            continue;
        }
        let end = code[at..].iter().position(|&c| c == ';').map_or(code.len(), |p| at + p);
        let before: String = code[..at].iter().collect::<String>();
        let before = before.trim_end();
        let public = before.ends_with("pub")
            || (before.ends_with(')') && before.rfind("pub(").is_some_and(|p| !before[p..].contains('\n')));
        statements.push((at, end));
        for (path, name) in use_tree(&code[at + 4..end]) {
            let Some(path) = absolute(at, &path) else { continue };
            if public {
                names.reexports.insert(name, path);
            } else {
                names.uses.push((path, in_test(at)));
            }
        }
    }
    // Paths in the code outside `use` statements.
    for at in 0..code.len() {
        if !is_ident(code[at]) || (at > 0 && (is_ident(code[at - 1]) || code[at - 1] == ':')) {
            continue;
        }
        if statements.iter().any(|&(s, e)| s <= at && at < e) {
            continue;
        }
        let mut j = at;
        while j < code.len() && is_ident(code[j]) {
            j += 1;
        }
        if code.get(j) != Some(&':') || code.get(j + 1) != Some(&':') {
            continue;
        }
        for (path, _) in use_tree(&code[at..]) {
            if let Some(path) = absolute(at, &path) {
                names.uses.push((path, in_test(at)));
            }
        }
    }
    names
}

/// File → the other files it depends on: each named path resolved to the file that defines
/// it, through re-exports (a `pub use` is a door to another file, not a use of it). A file's
/// use of its own folder's `mod.rs` (or any ancestor's: `super::Device`) is no edge: that is
/// the ground its folder shares, and the folders are held to one direction by the top-level
/// check. Test modules inside files count only `with_tests`: a test may take a neighbour as
/// its reference.
fn file_graph(files: &Files, with_tests: bool) -> BTreeMap<String, BTreeSet<String>> {
    let names: BTreeMap<&String, Names> = files.iter().map(|(m, s)| (m, names_in(m, s, files))).collect();
    // The file a path lands in, following re-exports (at most a few deep).
    fn resolve(path: &[String], files: &Files, names: &BTreeMap<&String, Names>, depth: usize) -> String {
        let mut module = String::new();
        let mut taken = 0;
        for j in 1..=path.len() {
            let candidate = path[..j].join("::");
            if !files.contains_key(&candidate) {
                break;
            }
            module = candidate;
            taken = j;
        }
        if let (Some(name), true) = (path.get(taken), depth < 8) {
            if let Some(target) = names[&module].reexports.get(name) {
                return resolve(&join(target, &path[taken + 1..]), files, names, depth + 1);
            }
        }
        module
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = files.keys().map(|m| (m.clone(), BTreeSet::new())).collect();
    for (module, named) in &names {
        for (path, test) in &named.uses {
            if *test && !with_tests {
                continue;
            }
            let target = resolve(path, files, &names, 0);
            let ancestor = target.is_empty() || module.starts_with(&format!("{target}::"));
            if &&target != module && !ancestor {
                graph.get_mut(*module).unwrap().insert(target);
            }
        }
    }
    graph
}

/// The graph's cycles: each strongly connected set of more than one file (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, node: &'a str) {
        let n = w.index.len();
        w.index.insert(node, n);
        w.low.insert(node, n);
        w.stack.push(node);
        for next in w.graph.get(node).into_iter().flatten() {
            if !w.index.contains_key(next.as_str()) {
                visit(w, next);
                let low = w.low[next.as_str()].min(w.low[node]);
                w.low.insert(node, low);
            } else if w.stack.contains(&next.as_str()) {
                let low = w.index[next.as_str()].min(w.low[node]);
                w.low.insert(node, low);
            }
        }
        if w.low[node] == w.index[node] {
            let mut set = BTreeSet::new();
            while let Some(top) = w.stack.pop() {
                set.insert(top.to_string());
                if top == node {
                    break;
                }
            }
            if set.len() > 1 {
                w.found.push(set);
            }
        }
    }
    let mut w = Walk { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for node in graph.keys() {
        if !w.index.contains_key(node.as_str()) {
            visit(&mut w, node);
        }
    }
    w.found
}

/// Module → the other top-level modules it uses: the file graph seen from above (the crate
/// root, whose `pub use` lines are doors, is no module).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap().to_string();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, uses) in file_graph(&source_files(src), true) {
        if file.is_empty() {
            continue;
        }
        let from = top(&file);
        let entry = graph.entry(from.clone()).or_default();
        entry.extend(uses.iter().filter(|u| !u.is_empty()).map(|u| top(u)).filter(|u| *u != from));
    }
    graph
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Import cycles between files that are known and still to be broken (issue 41), each as the
/// set of its files. Every other cycle fails the test, and so does an entry here that is no
/// longer a cycle: when one is broken, its line goes.
const CYCLES_TO_BREAK: &[&[&str]] = &[
    // A job holds its device's pipeline, and the pipeline holds the stage actors' addresses,
    // which take jobs: the types refer to each other. Breaking it means a job that holds only
    // what its stages use of the device, not the stage addresses.
    &["actors::job", "actors::pipeline"],
    // Found by this check, not yet by the issue.
    &["daemon::jobs", "daemon::metrics", "daemon::restart", "daemon::service", "daemon::worker"],
];

#[test]
fn files_import_each_other_without_a_cycle() {
    let graph = file_graph(&source_files(&src()), false);
    for (file, uses) in &graph {
        println!("{file} -> {uses:?}");
    }
    // The graph is read from the real tree: edges that must exist do, through a `super::`
    // path, a grouped `crate::` import and a re-export at the crate root.
    assert!(graph["actors::admission"].contains("actors::stage_actor"), "the parser missed a `super::` use");
    assert!(graph["actors::htod"].contains("backend"), "the parser missed a `crate::backend` use");
    assert!(graph["actors::ntt"].contains("request"), "the parser missed a `crate::request` use");
    let allowed: Vec<BTreeSet<String>> =
        CYCLES_TO_BREAK.iter().map(|c| c.iter().map(|f| f.to_string()).collect()).collect();
    let found = cycles(&graph);
    let unexpected: Vec<_> = found.iter().filter(|c| !allowed.contains(c)).collect();
    let stale: Vec<_> = allowed.iter().filter(|c| !found.contains(c)).collect();
    let edges = |cycle: &BTreeSet<String>| -> Vec<String> {
        let mut edges = Vec::new();
        for file in cycle {
            edges.extend(graph[file].iter().filter(|u| cycle.contains(*u)).map(|u| format!("{file} -> {u}")));
        }
        edges
    };
    let unexpected: Vec<_> = unexpected.into_iter().map(edges).collect();
    assert!(unexpected.is_empty(), "files of src/ import each other in a cycle: {unexpected:#?}");
    assert!(stale.is_empty(), "no longer a cycle, so take it off CYCLES_TO_BREAK: {stale:?}");
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
    let found = cycles(&graph);
    assert!(found.is_empty(), "the modules of src/ depend on each other in a cycle: {found:?}");
}

/// A crate of the given files, by module path.
fn crate_of(files: &[(&str, &str)]) -> Files {
    files.iter().map(|(m, s)| (m.to_string(), s.to_string())).collect()
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    // The negative twins. A back edge from the bottom layer to the top closes a cycle.
    let mut graph = module_graph(&src());
    graph.get_mut("plan").unwrap().insert("prover".to_string());
    assert!(!cycles(&graph).is_empty(), "plan -> prover -> ... -> plan is a cycle");
    // Two files of one folder that import each other, one through `super::`, one through a
    // grouped `crate::` import.
    let two = crate_of(&[
        ("", "pub mod a;"),
        ("a", "pub mod job;\npub mod pipeline;"),
        ("a::job", "use super::pipeline::Pipeline;\npub struct Job(Pipeline);"),
        ("a::pipeline", "use crate::{a::{job::Job}, b};\npub struct Pipeline(Vec<Job>);"),
        ("b", "pub struct B;"),
    ]);
    let expected: BTreeSet<String> = ["a::job", "a::pipeline"].map(String::from).into();
    assert_eq!(cycles(&file_graph(&two, false)), vec![expected.clone()]);
    // The same cycle closed through re-exports: a path in code, to a name the crate root
    // re-exports, and to one the folder's `mod.rs` re-exports (one renamed).
    let through_doors = crate_of(&[
        ("", "pub mod a;\npub use a::job::Job;\npub use a::Pipeline as Line;"),
        ("a", "pub mod job;\npub mod pipeline;\npub use pipeline::Pipeline;"),
        ("a::job", "pub struct Job(std::sync::Arc<crate::Line>);"),
        ("a::pipeline", "pub fn send(job: crate::Job) {}"),
    ]);
    assert_eq!(cycles(&file_graph(&through_doors, false)), vec![expected.clone()]);
    // A test module's `super::*` is its own file, and a doc link or a string names nothing;
    // the re-exports alone are no cycle.
    let none = crate_of(&[
        ("", "pub mod a;\npub use a::job::Job;"),
        ("a", "pub mod job;\npub mod pipeline;\npub use job::Job;\npub fn start() -> job::Job { job::Job }"),
        (
            "a::job",
            "//! See [`crate::a::pipeline`].\npub struct Job;\nfn f() { super::start(); }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::a::pipeline::send;\n}",
        ),
        ("a::pipeline", "use crate::Job;\nconst S: &str = \"super::job }\";\npub fn send(job: Job) {}"),
    ]);
    let graph = file_graph(&none, false);
    assert!(cycles(&graph).is_empty(), "{graph:?}");
    assert_eq!(graph["a::pipeline"], ["a::job"].map(String::from).into());
    assert!(graph["a::job"].is_empty(), "{graph:?}");
    assert_eq!(graph["a"], ["a::job"].map(String::from).into());
    // With its test module, `a::job` uses `a::pipeline`: a cycle.
    assert_eq!(cycles(&file_graph(&none, true)), vec![expected]);
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

/// What stands between `document` and a one-to-one mirror of `files`: each file without its
/// `### \`name.rs\`` section, and each such section without its file.
fn mirror_gaps(document: &str, files: &BTreeSet<String>) -> Vec<String> {
    let sections: BTreeSet<String> = document
        .lines()
        .filter_map(|line| line.strip_prefix("### `"))
        .filter_map(|rest| rest.split('`').next())
        .filter(|name| name.ends_with(".rs"))
        .map(String::from)
        .collect();
    let mut gaps: Vec<String> = files.difference(&sections).map(|f| format!("{f} has no section")).collect();
    gaps.extend(sections.difference(files).map(|s| format!("the section {s} has no file")));
    gaps
}

#[test]
fn actors_md_mirrors_src_actors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files: BTreeSet<String> = std::fs::read_dir(root.join("src/actors"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .collect();
    assert!(files.contains("job.rs") && files.contains("pipeline.rs"), "{files:?}");
    let document = std::fs::read_to_string(root.join("actors.md")).unwrap();
    let gaps = mirror_gaps(&document, &files);
    assert!(gaps.is_empty(), "actors.md must mirror src/actors/ one to one: {gaps:?}");
    // The negative twins: a file renamed without its section, and a section left for a file gone.
    let renamed: BTreeSet<String> = files.iter().map(|f| f.replace("job.rs", "messages.rs")).collect();
    assert_eq!(
        mirror_gaps(&document, &renamed),
        ["messages.rs has no section", "the section job.rs has no file"].map(String::from)
    );
}
