//! Timelines built by hand, exported as a Chrome trace, an SVG chart and a summary, checked
//! against figures computed by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};
use snarkpipe::timeline::chrome::{to_chrome_trace, write_chrome_trace};
use snarkpipe::timeline::summary::{summarize, StageRef};
use snarkpipe::timeline::svg::{to_svg, write_svg};
use snarkpipe::timeline::{Timeline, TimelineRecorder, Track};
use snarkpipe::Stage;

const MS: f64 = 1e-3;
const EPS: f64 = 1e-9;

fn actor(name: &str, device: Option<usize>, worker: Option<usize>) -> Track {
    Track::Actor { name: name.to_string(), device, worker }
}

fn stream(device: usize, name: &str) -> Track {
    Track::Stream { device, name: name.to_string() }
}

/// Records spans given in milliseconds from the recorder's origin.
struct Builder {
    recorder: TimelineRecorder,
}

impl Builder {
    fn new() -> Builder {
        Builder { recorder: TimelineRecorder::new() }
    }

    fn span(self, track: Track, stage: Stage, partition: usize, start_ms: f64, end_ms: f64) -> Builder {
        self.span_with(track, stage, partition, start_ms, end_ms, BTreeMap::new())
    }

    fn span_with(
        self,
        track: Track,
        stage: Stage,
        partition: usize,
        start_ms: f64,
        end_ms: f64,
        args: BTreeMap<String, Value>,
    ) -> Builder {
        let origin = self.recorder.origin();
        let at = |ms: f64| origin + Duration::from_secs_f64(ms * MS);
        self.recorder.record(track, stage, partition, at(start_ms), at(end_ms), args);
        self
    }

    fn build(self) -> Timeline {
        self.recorder.snapshot()
    }
}

/// A small pipeline over two devices: host actors, device actors and streams.
fn two_device_run() -> Timeline {
    let args = BTreeMap::from([("bytes".to_string(), json!(4096)), ("kind".to_string(), json!("g1"))]);
    Builder::new()
        .span(actor("admission", None, None), Stage::Admission, 0, 0.0, 0.2)
        .span(actor("pin", None, None), Stage::Pin, 0, 0.2, 1.0)
        .span(actor("pin", None, None), Stage::Pin, 1, 1.0, 1.8)
        .span_with(stream(0, "copy"), Stage::Htod, 0, 1.0, 1.5, args.clone())
        .span(actor("msm", Some(0), Some(1)), Stage::Msm, 0, 1.5, 3.0)
        .span_with(stream(0, "compute"), Stage::Msm, 0, 1.6, 2.9, args)
        .span(stream(1, "copy"), Stage::Htod, 1, 1.8, 2.2)
        .span(stream(1, "compute"), Stage::Ntt, 1, 2.2, 2.6)
        .span(actor("assemble", None, None), Stage::Assemble, 0, 3.0, 3.25)
        .build()
}

fn events_with_ph<'a>(trace: &'a Value, ph: &str) -> Vec<&'a Value> {
    trace["traceEvents"].as_array().expect("traceEvents").iter().filter(|e| e["ph"] == ph).collect()
}

#[test]
fn chrome_trace_has_one_complete_event_per_span() {
    let t = two_device_run();
    // Through text and back: what Perfetto would load.
    let trace: Value = serde_json::from_str(&to_chrome_trace(&t).to_string()).expect("parses");
    let complete = events_with_ph(&trace, "X");
    assert_eq!(complete.len(), t.spans.len());

    let threads: BTreeMap<(u64, u64), String> = events_with_ph(&trace, "M")
        .into_iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| ((e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()), e["args"]["name"].as_str().unwrap().into()))
        .collect();
    let tracks: BTreeSet<&Track> = t.spans.iter().map(|s| &s.track).collect();
    assert_eq!(threads.len(), tracks.len(), "one thread_name per track");
    let labels: BTreeSet<String> = tracks.iter().map(|t| t.label()).collect();
    assert_eq!(threads.values().cloned().collect::<BTreeSet<_>>(), labels);

    for (span, event) in t.spans.iter().zip(&complete) {
        assert_eq!(event["name"], span.stage.name());
        assert!((event["ts"].as_f64().unwrap() - span.start_s * 1e6).abs() < 1e-3);
        assert!((event["dur"].as_f64().unwrap() - span.duration_s() * 1e6).abs() < 1e-3);
        assert_eq!(event["args"]["partition"], json!(span.partition));
        for (key, value) in &span.args {
            assert_eq!(&event["args"][key], value);
        }
        let thread = (event["pid"].as_u64().unwrap(), event["tid"].as_u64().unwrap());
        assert_eq!(threads.get(&thread), Some(&span.track.label()), "event on its track's thread");
    }

    let processes: BTreeSet<String> = events_with_ph(&trace, "M")
        .into_iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(processes, BTreeSet::from(["host".to_string(), "gpu0".to_string(), "gpu1".to_string()]));
}

#[test]
fn chrome_trace_writes_a_file_that_parses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    write_chrome_trace(&two_device_run(), &path).expect("write");
    let trace: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("parses");
    assert_eq!(events_with_ph(&trace, "X").len(), two_device_run().spans.len());
    // Negative twin: an unwritable path is an error, not a panic.
    assert!(write_chrome_trace(&Timeline::default(), dir.path().join("missing/trace.json")).is_err());
}

/// A minimal well-formedness check: tags nest and close, attribute quotes balance.
fn assert_well_formed(svg: &str) {
    let mut open: Vec<String> = Vec::new();
    let mut rest = svg;
    while let Some(at) = rest.find('<') {
        let end = rest[at..].find('>').expect("unclosed tag") + at;
        let tag = &rest[at + 1..end];
        assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
        assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(open.pop().as_deref(), Some(name), "mismatched </{name}>");
        } else if !tag.ends_with('/') {
            open.push(tag.split_whitespace().next().unwrap().to_string());
        }
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty(), "unclosed elements: {open:?}");
    assert!(!rest.contains('>'), "stray '>' in text");
}

#[test]
fn svg_has_a_bar_per_span_a_legend_and_escaped_labels() {
    let t = Builder::new()
        .span(actor("a<b & c", None, None), Stage::Pin, 0, 0.0, 1.0)
        .span(stream(0, "compute"), Stage::Msm, 0, 1.0, 4.0)
        .span(stream(0, "compute"), Stage::Msm, 12, 4.0, 4.01)
        .span(stream(0, "copy"), Stage::Htod, 1, 0.5, 1.5)
        .build();
    let svg = to_svg(&t);
    assert!(svg.starts_with("<svg"));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_well_formed(&svg);

    let stages: BTreeSet<Stage> = t.spans.iter().map(|s| s.stage).collect();
    assert_eq!(svg.matches(r#"<rect class="bar""#).count(), t.spans.len());
    assert_eq!(svg.matches(r#"<rect class="legend""#).count(), stages.len());
    assert_eq!(svg.matches("<rect").count(), t.spans.len() + stages.len());
    for stage in &stages {
        assert!(svg.contains(&format!(">{}</text>", stage.name())), "legend names {stage}");
    }
    assert!(svg.contains("a&lt;b &amp; c"));
    assert!(!svg.contains("a<b"));
    assert_eq!(svg.matches("<title>").count(), t.spans.len());
    // A wide bar shows its partition; a hairline one does not.
    assert!(svg.contains(r#"pointer-events="none">0</text>"#));
    assert!(!svg.contains(r#"pointer-events="none">12</text>"#));
    // The axis is in ms for a run under a second.
    assert!(svg.contains(" ms</text>"));
}

#[test]
fn svg_of_an_empty_timeline_is_still_a_document() {
    let svg = to_svg(&Timeline::default());
    assert_well_formed(&svg);
    assert_eq!(svg.matches("<rect").count(), 0);
    let dir = tempfile::tempdir().unwrap();
    write_svg(&Timeline::default(), dir.path().join("t.svg")).expect("write");
}

#[test]
fn overlap_of_two_pipelined_partitions_is_exact() {
    // p0: htod 0-2, msm 2-6. p1: htod 4-6, msm 6-10. Only during 4-6 are two partitions in
    // two stages: 2 ms of 10 ms of work. p1's budget wait during 0-4 is not work.
    let t = Builder::new()
        .span(actor("admission", Some(0), None), Stage::Admission, 1, 0.0, 4.0)
        .span(stream(0, "copy"), Stage::Htod, 0, 0.0, 2.0)
        .span(stream(0, "compute"), Stage::Msm, 0, 2.0, 6.0)
        .span(actor("msm", Some(0), None), Stage::Msm, 0, 1.9, 6.1)
        .span(stream(0, "copy"), Stage::Htod, 1, 4.0, 6.0)
        .span(stream(0, "compute"), Stage::Msm, 1, 6.0, 10.0)
        .build();
    let summary = summarize(&t);
    assert!((summary.overlap_fraction - 0.2).abs() < EPS, "{}", summary.overlap_fraction);
    assert!((summary.seconds_total - 10.0 * MS).abs() < EPS);
    // Each partition's msm counts once, from the stream, not again from the actor.
    assert!((summary.stage_seconds["msm"] - 8.0 * MS).abs() < EPS);
    assert!((summary.stage_seconds["htod"] - 4.0 * MS).abs() < EPS);
    assert!((summary.stage_seconds["admission"] - 4.0 * MS).abs() < EPS);
    assert!((summary.busy_fraction[&0] - 1.0).abs() < EPS);
    assert!(summary.idle_gaps.is_empty());
}

#[test]
fn a_sequential_timeline_has_no_overlap() {
    let t = Builder::new()
        .span(actor("pin", None, None), Stage::Pin, 0, 0.0, 1.0)
        .span(stream(0, "copy"), Stage::Htod, 0, 1.0, 2.0)
        .span(stream(0, "compute"), Stage::Msm, 0, 2.0, 3.0)
        .span(actor("pin", None, None), Stage::Pin, 1, 3.0, 4.0)
        .span(stream(0, "copy"), Stage::Htod, 1, 4.0, 5.0)
        .span(stream(0, "compute"), Stage::Msm, 1, 5.0, 6.0)
        .build();
    assert_eq!(summarize(&t).overlap_fraction, 0.0);

    // Two partitions at once, but in the same stage on two devices: still no pipelining.
    let t = Builder::new()
        .span(stream(0, "compute"), Stage::Msm, 0, 0.0, 2.0)
        .span(stream(1, "compute"), Stage::Msm, 1, 0.0, 2.0)
        .build();
    assert_eq!(summarize(&t).overlap_fraction, 0.0);
}

/// gpu0 works 0-3 ms, idles 3 ms to 3 + `gap_ms`, then works for 3 ms more; the host pins
/// partition 1 until just before the device resumes.
fn run_with_gap(gap_ms: f64) -> Timeline {
    let resume = 3.0 + gap_ms;
    Builder::new()
        .span(actor("pin", None, None), Stage::Pin, 0, 0.0, 0.5)
        .span(stream(0, "copy"), Stage::Htod, 0, 0.0, 1.0)
        .span(stream(0, "compute"), Stage::Ntt, 0, 1.0, 3.0)
        .span(actor("ntt", Some(0), None), Stage::Ntt, 0, 1.0, 3.0)
        .span(actor("pin", None, None), Stage::Pin, 1, 2.0, resume - 0.1)
        .span(stream(0, "copy"), Stage::Htod, 1, resume, resume + 1.0)
        .span(stream(0, "compute"), Stage::Msm, 1, resume + 1.0, resume + 3.0)
        .build()
}

#[test]
fn a_2ms_gap_lowers_busy_and_is_reported_with_what_it_waited_on() {
    let summary = summarize(&run_with_gap(2.0));
    assert!((summary.busy_fraction[&0] - 6.0 / 8.0).abs() < EPS, "{:?}", summary.busy_fraction);
    assert_eq!(summary.idle_gaps.len(), 1);
    let gap = &summary.idle_gaps[0];
    assert_eq!(gap.device, 0);
    assert!((gap.start_s - 3.0 * MS).abs() < EPS && (gap.end_s - 5.0 * MS).abs() < EPS);
    assert_eq!(gap.next, StageRef { stage: Stage::Htod, partition: 1 });
    assert_eq!(gap.waiting_on, Some(StageRef { stage: Stage::Pin, partition: 1 }));

    let text = summary.to_string();
    assert!(text.contains("gpu0 75.0%"), "{text}");
    assert!(text.contains("waiting on pin of partition 1"), "{text}");
    let json = serde_json::to_value(&summary).expect("serializes");
    assert_eq!(json["idle_gaps"][0]["waiting_on"]["stage"], "pin");
}

/// A device gap during which the partition that ends it was still being synthesized is time
/// the device waited on synthesis, up to the synthesis's end (the pin after it is not); its
/// negative twin, the same timeline with that span a pin, waited on none.
#[test]
fn a_gap_while_the_next_partition_synthesizes_is_waiting_on_synthesis() {
    let run = |stage: Stage| {
        Builder::new()
            .span(stream(0, "compute"), Stage::Ntt, 0, 0.0, 2.0)
            .span(actor("synthesize", Some(0), Some(1)), stage, 1, 0.5, 3.5)
            .span(actor("pin", Some(0), Some(1)), Stage::Pin, 1, 3.5, 4.9)
            .span(stream(0, "copy"), Stage::Htod, 1, 5.0, 6.0)
            .build()
    };
    let summary = summarize(&run(Stage::Synthesize));
    assert!((summary.waited_on_synthesis_s[&0] - 1.5 * MS).abs() < EPS, "{:?}", summary.waited_on_synthesis_s);
    assert!(summary.to_string().contains("waited on synthesis: gpu0 1.500 ms"), "{summary}");
    let summary = summarize(&run(Stage::Pin));
    assert_eq!(summary.waited_on_synthesis_s[&0], 0.0);
    assert!(summary.to_string().contains("no device waited on synthesis"), "{summary}");
}

/// A partition that reached the synthesis stage only late in a device gap (on the H200 a
/// witness passing through in 0.016 ms was charged the 8.6 s gap before it, the time the
/// device waited for its placement and staging): only the synthesis's overlap with the gap is
/// waiting on synthesis. Fails when the gap is counted from its start.
#[test]
fn a_synthesis_that_begins_late_in_a_gap_is_charged_only_its_overlap() {
    let run = Builder::new()
        .span(stream(0, "compute"), Stage::Ntt, 0, 0.0, 2.0)
        .span(actor("synthesize", Some(0), Some(1)), Stage::Synthesize, 1, 4.0, 4.25)
        .span(actor("pin", Some(0), Some(1)), Stage::Pin, 1, 4.25, 4.9)
        .span(stream(0, "copy"), Stage::Htod, 1, 5.0, 6.0)
        .build();
    let summary = summarize(&run);
    assert!((summary.waited_on_synthesis_s[&0] - 0.25 * MS).abs() < EPS, "{:?}", summary.waited_on_synthesis_s);
}

#[test]
fn a_half_millisecond_gap_is_not_reported() {
    let summary = summarize(&run_with_gap(0.5));
    assert!(summary.idle_gaps.is_empty(), "{:?}", summary.idle_gaps);
    assert!((summary.busy_fraction[&0] - 6.0 / 6.5).abs() < EPS);
    assert!(summary.to_string().contains("no idle gaps"));
}

#[test]
fn edge_cases_give_finite_figures() {
    let empty = summarize(&Timeline::default());
    assert_eq!((empty.seconds_total, empty.overlap_fraction), (0.0, 0.0));
    assert!(empty.busy_fraction.is_empty() && empty.idle_gaps.is_empty() && empty.stage_seconds.is_empty());
    assert!(!empty.to_string().contains("NaN"));

    let single = summarize(&Builder::new().span(stream(0, "compute"), Stage::Msm, 0, 1.0, 3.0).build());
    assert!((single.seconds_total - 2.0 * MS).abs() < EPS);
    assert!((single.busy_fraction[&0] - 1.0).abs() < EPS);
    assert_eq!(single.overlap_fraction, 0.0);

    // A device seen only through its actors: their device-side spans are its work.
    let actors_only = summarize(
        &Builder::new()
            .span(actor("admission", Some(1), None), Stage::Admission, 0, 0.0, 5.0)
            .span(actor("msm", Some(1), None), Stage::Msm, 0, 0.0, 1.0)
            .span(actor("msm", Some(1), None), Stage::Msm, 1, 3.0, 4.0)
            .build(),
    );
    assert!((actors_only.busy_fraction[&1] - 0.5).abs() < EPS, "{:?}", actors_only.busy_fraction);
    assert_eq!(actors_only.idle_gaps.len(), 1);
    assert_eq!(actors_only.idle_gaps[0].next, StageRef { stage: Stage::Msm, partition: 1 });

    // A zero-length span neither divides by zero nor counts as work.
    let instant = summarize(&Builder::new().span(stream(0, "copy"), Stage::Htod, 0, 1.0, 1.0).build());
    assert_eq!(instant.busy_fraction[&0], 0.0);
    assert!(instant.overlap_fraction.is_finite());
}
