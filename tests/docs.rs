//! The documents' pipeline diagrams against the stage list.
//!
//! `Stage::ALL` (`src/stage.rs`) is the one list of a partition's stages; the README, the
//! crate's doc comment (`src/lib.rs`) and `actors.md` each draw it as a line of words joined by
//! arrows (`request ─► synthesize ─► …`). These tests read those lines from the files and
//! check that each names exactly the stages of `Stage::ALL`, in order, so that a stage added
//! to the list (or dropped from it) fails here until every diagram is redrawn.

use std::path::Path;

use snarkpipe::stage::Stage;

/// The documents that draw the pipeline, from the repository root, and how many diagrams
/// each must have: a file whose diagram was deleted or whose arrows were redrawn in other
/// characters must fail, not pass with nothing checked.
const DOCUMENTS: [(&str, usize); 3] = [("README.md", 1), ("src/lib.rs", 1), ("actors.md", 1)];

/// The arrows a diagram joins its words with (the longer first, so that `──►` is not read as
/// `─` followed by `─►`).
const ARROWS: [&str; 2] = ["──►", "─►"];

/// How a diagram's word maps to the stage list. A word that is a stage's `Stage::name` is
/// that stage; the words below are the ends of a partition's path and the scheduler, which
/// the diagrams draw but which are not stages. Any other word is an error, so a misspelt or
/// renamed stage fails rather than being skipped.
///
/// No diagram names a stage by another word than its `Stage::name` today; one that did would
/// need its own line in `stage_named`'s match, next to these.
const NOT_STAGES: [&str; 5] = [
    "request",   // README, lib.rs: where a partition comes from
    "proof",     // README, lib.rs: what leaves after the last stage
    "submit",    // actors.md: `Prover::submit`, where a request enters
    "scheduler", // actors.md: the prover's scheduler thread, ahead of the stage actors
    "handle",    // actors.md: the request's `ProofHandle`, where the proof goes
];

/// The stage a diagram's word names: `Some` for a stage, `None` for one of [`NOT_STAGES`].
fn stage_named(word: &str) -> Result<Option<Stage>, String> {
    if let Some(stage) = Stage::ALL.into_iter().find(|s| s.name() == word) {
        return Ok(Some(stage));
    }
    if NOT_STAGES.contains(&word) {
        return Ok(None);
    }
    Err(format!("`{word}` is neither a stage of Stage::ALL nor one of the diagrams' other words {NOT_STAGES:?}"))
}

/// Checks that one diagram line names exactly the stages of `Stage::ALL`, in order. The line
/// may carry a comment marker (`//!`) and indentation; its words are what lies between
/// arrows.
fn check_diagram(line: &str) -> Result<(), String> {
    let line = line.trim_start().trim_start_matches("//!");
    let mut joined = line.to_string();
    for arrow in ARROWS {
        joined = joined.replace(arrow, "\u{0}");
    }
    let words: Vec<&str> = joined.split('\u{0}').map(str::trim).collect();
    if words.len() < 2 {
        return Err(format!("not a diagram (no arrow): {line:?}"));
    }
    let mut drawn = Vec::new();
    for word in &words {
        if word.is_empty() || word.contains(char::is_whitespace) {
            return Err(format!("`{word}` is not one word between two arrows in {line:?}"));
        }
        if let Some(stage) = stage_named(word)? {
            drawn.push(stage);
        }
    }
    if drawn != Stage::ALL {
        let names = |stages: &[Stage]| stages.iter().map(|s| s.name()).collect::<Vec<_>>().join(" ─► ");
        return Err(format!(
            "the diagram draws the stages\n  {}\nbut Stage::ALL is\n  {}\nin {line:?}",
            names(&drawn),
            names(&Stage::ALL)
        ));
    }
    Ok(())
}

/// The lines of `text` that draw the pipeline: those with an arrow.
fn diagrams(text: &str) -> Vec<&str> {
    text.lines().filter(|l| ARROWS.iter().any(|a| l.contains(a))).collect()
}

#[test]
fn every_pipeline_diagram_names_the_stages_of_the_stage_list_in_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failures = Vec::new();
    for (document, expected) in DOCUMENTS {
        let text = std::fs::read_to_string(root.join(document)).unwrap_or_else(|e| panic!("reading {document}: {e}"));
        let lines = diagrams(&text);
        if lines.len() != expected {
            failures.push(format!("{document}: {} pipeline diagrams, expected {expected}", lines.len()));
        }
        for line in lines {
            if let Err(e) = check_diagram(line) {
                failures.push(format!("{document}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The diagram of `stages` between the README's ends.
fn drawn(stages: &[&str]) -> String {
    let mut words = vec!["request"];
    words.extend_from_slice(stages);
    words.push("proof");
    words.join(" ─► ")
}

#[test]
fn a_diagram_with_a_stage_dropped_swapped_added_or_misspelt_fails_the_check() {
    let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
    // The twin's reference: the list itself, drawn as the README draws it (and as the crate
    // doc comment does, behind its comment marker), passes.
    check_diagram(&drawn(&names)).expect("the stage list drawn in order passes");
    check_diagram(&format!("//!  {}", drawn(&names))).expect("behind a doc-comment marker too");

    for i in 0..names.len() {
        let mut dropped = names.clone();
        dropped.remove(i);
        assert!(check_diagram(&drawn(&dropped)).is_err(), "dropping {} must fail", names[i]);

        let mut doubled = names.clone();
        doubled.insert(i, names[i]);
        assert!(check_diagram(&drawn(&doubled)).is_err(), "drawing {} twice must fail", names[i]);

        let mut misspelt: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        misspelt[i].push('s');
        let misspelt: Vec<&str> = misspelt.iter().map(String::as_str).collect();
        assert!(check_diagram(&drawn(&misspelt)).is_err(), "misspelling {} must fail", names[i]);
    }
    for i in 0..names.len() - 1 {
        let mut swapped = names.clone();
        swapped.swap(i, i + 1);
        assert!(check_diagram(&drawn(&swapped)).is_err(), "swapping {} and {} must fail", names[i], names[i + 1]);
    }
    // A word that is neither a stage nor one of the diagrams' ends, where a stage would be.
    let mut foreign = names.clone();
    foreign.insert(1, "scatter");
    assert!(check_diagram(&drawn(&foreign)).is_err());
    // Two words between one pair of arrows (an arrow lost).
    assert!(check_diagram(&drawn(&names).replacen(" ─► ", " ", 2)).is_err());
    assert!(check_diagram("no arrow here").is_err());
}

#[test]
fn lib_rs_diagram_lacking_the_synthesis_stage_is_what_the_check_catches() {
    // The crate's doc comment drew this line until the synthesis stage was added to it: the
    // check must name it as failing.
    let old = "//!  request ─► admission ─► pin ─► htod ─► ntt ─► msm ─► dtoh ─► assemble ─► verify ─► proof";
    let error = check_diagram(old).expect_err("the diagram without synthesize fails");
    assert!(error.contains("synthesize"), "{error}");
}

/// The documents a newcomer reads, from the repository root: every Markdown file outside
/// `docs/runs/` (raw outputs are kept as the tools printed them) and `target/`.
fn documents(root: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap();
            let skip = ["target", "docs/runs", ".git", ".cuda", ".gpu", "node_modules"];
            if skip.iter().any(|s| rel == Path::new(s)) || rel.to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The relative paths in `text` (a document in the folder `dir`, relative to the repository
/// root) that climb out of the repository: a link or code span such as `../shared/GPU.md` in a
/// file at the root. A clone holds only the repository, so such a path names nothing a reader
/// has; the fact belongs in the document with its public source.
fn paths_outside(dir: &Path, text: &str) -> Vec<String> {
    let depth = dir.components().count();
    let mut outside = Vec::new();
    for (start, _) in text.match_indices("../") {
        // Only a path's beginning: not the middle of `a/../b` or of a longer `../../x`.
        let before = text[..start].chars().next_back();
        if before.is_some_and(|c| c == '.' || c == '/' || c.is_alphanumeric() || c == '_' || c == '-') {
            continue;
        }
        let path: String = text[start..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ')' | '`' | '"' | '\'' | ']' | '>' | ',' | ';'))
            .collect();
        let mut level = depth as isize;
        for part in path.split('/') {
            match part {
                ".." => level -= 1,
                "." | "" => {}
                _ => level += 1,
            }
            if level < 0 {
                outside.push(path.clone());
                break;
            }
        }
    }
    outside
}

#[test]
fn no_document_cites_a_path_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = documents(root);
    assert!(docs.iter().any(|d| d.ends_with("BENCHMARKS.md")) && docs.len() >= 10, "found {docs:?}");
    let mut failures = Vec::new();
    for doc in &docs {
        let rel = doc.strip_prefix(root).unwrap();
        let text = std::fs::read_to_string(doc).unwrap();
        for path in paths_outside(rel.parent().unwrap(), &text) {
            failures.push(format!("{}: {path}", rel.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "paths outside the repository (state the fact and its public source instead):\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_path_that_climbs_out_of_the_repository_is_caught() {
    // The twin: what BENCHMARKS.md cited before, and the same climb from a folder one down.
    assert_eq!(paths_outside(Path::new(""), "described in `../shared/GPU.md`: one H200"), ["../shared/GPU.md"]);
    assert_eq!(paths_outside(Path::new("docs"), "[notes](../../shared/GPU.md)"), ["../../shared/GPU.md"]);
    assert_eq!(paths_outside(Path::new("docs/history"), "see ../../../x"), ["../../../x"]);
    // Paths that stay inside pass.
    assert!(paths_outside(Path::new("docs"), "[bench](../BENCHMARKS.md), `../runs/x.log`").is_empty());
    assert!(paths_outside(Path::new("docs/history"), "[r](../../README.md) and ../runs/a/b.json").is_empty());
    assert!(paths_outside(Path::new("kernels"), "[NOTES](../BENCHMARKS.md#msm)").is_empty());
}

/// Whether a document is within its bound of lines, with the count when it is not.
fn within_lines(text: &str, bound: usize) -> Result<(), usize> {
    let lines = text.lines().count();
    if lines <= bound {
        Ok(())
    } else {
        Err(lines)
    }
}

/// The bounds issue 41 set: the README a newcomer reads in a few minutes, BENCHMARKS.md one
/// current table per topic. What no longer fits moves to docs/ (the README) or docs/history/.
const LINE_BOUNDS: [(&str, usize); 2] = [("README.md", 150), ("BENCHMARKS.md", 400)];

#[test]
fn the_readme_and_the_benchmarks_stay_within_their_bounds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (document, bound) in LINE_BOUNDS {
        let text = std::fs::read_to_string(root.join(document)).unwrap();
        if let Err(lines) = within_lines(&text, bound) {
            panic!("{document} has {lines} lines, over its bound of {bound}: move history to docs/history/ or detail to docs/");
        }
    }
    // The twin: one line over fails, the bound itself passes.
    let at = "line\n".repeat(400);
    assert_eq!(within_lines(&at, 400), Ok(()));
    assert_eq!(within_lines(&(at + "one more\n"), 400), Err(401));
}

/// Runs `scripts/plot-benchmarks.py --check` (it reads every raw output a plot is drawn from
/// and draws nothing, so it needs no matplotlib) with `extra` arguments.
fn plot_check(extra: &[&str]) -> std::process::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::process::Command::new("python3")
        .arg(root.join("scripts/plot-benchmarks.py"))
        .arg("--check")
        .args(extra)
        .output()
        .expect("python3 runs scripts/plot-benchmarks.py")
}

#[test]
fn the_plots_raw_outputs_are_where_the_script_reads_them() {
    // A raw output moved, emptied or reformatted makes the script stop naming it, so the
    // committed plots cannot silently lose their source.
    let output = plot_check(&[]);
    let report = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    for plot in ["partitions", "supraseal", "kernels_sppark", "filecoin", "device_memory", "msm"] {
        assert!(report.lines().any(|l| l.starts_with(plot)), "no figures for {plot}:\n{report}");
    }
    // The twin: the same readers pointed at a folder without the raw outputs fail, naming one.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let missing = plot_check(&["--runs", root.join("docs/plots").to_str().unwrap()]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no such file"), "{missing:?}");
}
