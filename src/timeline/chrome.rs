//! Exports a timeline in the Chrome Trace Event format, which ui.perfetto.dev and
//! chrome://tracing open: one process per device plus one for the host, one thread per track.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::{json, Value};

use super::recorder::{Timeline, Track};
use crate::error::{Error, Result};
use crate::stage::Stage;

/// The process a track is shown under: the host, or the device it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Process {
    Host,
    Device(usize),
}

impl Process {
    pub(crate) fn of(track: &Track) -> Process {
        track.device().map_or(Process::Host, Process::Device)
    }

    /// Trace pids: 1 for the host, 2 + d for device d (pid 0 is special in some viewers).
    fn pid(self) -> usize {
        match self {
            Process::Host => 1,
            Process::Device(d) => d.saturating_add(2),
        }
    }

    pub(crate) fn name(self) -> String {
        match self {
            Process::Host => "host".to_string(),
            Process::Device(d) => format!("gpu{d}"),
        }
    }
}

/// The tracks of a timeline in the order a reader expects: host first, then each device; within
/// a process actors before streams, actors in pipeline order of the first stage they ran.
pub(crate) fn tracks_in_display_order(t: &Timeline) -> Vec<&Track> {
    let mut first_stage: BTreeMap<&Track, Stage> = BTreeMap::new();
    for span in &t.spans {
        first_stage.entry(&span.track).and_modify(|s| *s = (*s).min(span.stage)).or_insert(span.stage);
    }
    let mut tracks: Vec<(&Track, Stage)> = first_stage.into_iter().collect();
    tracks.sort_by_key(|&(track, stage)| {
        let (kind, worker) = match track {
            Track::Actor { worker, .. } => (0, *worker),
            Track::Stream { .. } => (1, None),
        };
        (Process::of(track), kind, stage, worker, track.label())
    });
    tracks.into_iter().map(|(track, _)| track).collect()
}

/// The timeline as a Chrome trace: `{"traceEvents": [...], "displayTimeUnit": "ms"}`.
///
/// Each span is a complete event (`"ph": "X"`) named after its stage, with `ts` and `dur` in
/// microseconds and the span's args plus its `partition` as `args`.
pub fn to_chrome_trace(t: &Timeline) -> Value {
    let tracks = tracks_in_display_order(t);
    let mut events = Vec::with_capacity(t.spans.len() + 2 * tracks.len() + 4);

    // Thread ids count from 1 within each process, in display order.
    let mut tids: BTreeMap<&Track, (usize, usize)> = BTreeMap::new();
    let mut next_tid: BTreeMap<Process, usize> = BTreeMap::new();
    for (order, track) in tracks.iter().enumerate() {
        let process = Process::of(track);
        let tid = next_tid.entry(process).or_insert(0);
        if *tid == 0 {
            let sort_index = match process {
                Process::Host => 0,
                Process::Device(d) => d.saturating_add(1),
            };
            events.push(metadata("process_name", process.pid(), 0, json!({ "name": process.name() })));
            events.push(metadata("process_sort_index", process.pid(), 0, json!({ "sort_index": sort_index })));
        }
        *tid += 1;
        tids.insert(track, (process.pid(), *tid));
        events.push(metadata("thread_name", process.pid(), *tid, json!({ "name": track.label() })));
        events.push(metadata("thread_sort_index", process.pid(), *tid, json!({ "sort_index": order })));
    }

    for span in &t.spans {
        let (pid, tid) = tids[&span.track];
        let mut args: serde_json::Map<String, Value> = span.args.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        args.insert("partition".to_string(), json!(span.partition));
        events.push(json!({
            "name": span.stage.name(),
            "cat": if span.track.is_device() { "device" } else { "actor" },
            "ph": "X",
            "ts": span.start_s * 1e6,
            "dur": span.duration_s() * 1e6,
            "pid": pid,
            "tid": tid,
            "args": args,
        }));
    }

    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

fn metadata(name: &str, pid: usize, tid: usize, args: Value) -> Value {
    json!({ "name": name, "ph": "M", "pid": pid, "tid": tid, "args": args })
}

/// Writes [`to_chrome_trace`] to `path`.
pub fn write_chrome_trace(t: &Timeline, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let context = || format!("writing the Chrome trace to {}", path.display());
    let file = File::create(path).map_err(|e| Error::io(context(), e))?;
    let mut writer = BufWriter::new(file);
    serde_json::to_writer(&mut writer, &to_chrome_trace(t)).map_err(|e| Error::io(context(), e.into()))?;
    writer.flush().map_err(|e| Error::io(context(), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::recorder::Span;

    fn span(track: Track, stage: Stage, partition: usize, start_s: f64, end_s: f64) -> Span {
        Span { track, stage, partition, start_s, end_s, args: BTreeMap::new() }
    }

    #[test]
    fn host_first_then_devices_actors_before_streams_in_pipeline_order() {
        let actor = |name: &str, device| Track::Actor { name: name.into(), device, worker: None };
        let stream = |device, name: &str| Track::Stream { device, name: name.into() };
        let t = Timeline {
            spans: vec![
                span(stream(0, "compute"), Stage::Msm, 0, 0.0, 1.0),
                span(actor("msm", Some(0)), Stage::Msm, 0, 0.0, 1.0),
                span(actor("htod", Some(0)), Stage::Htod, 0, 0.0, 1.0),
                span(actor("assemble", None), Stage::Assemble, 0, 0.0, 1.0),
                span(actor("pin", None), Stage::Pin, 0, 0.0, 1.0),
            ],
        };
        let labels: Vec<String> = tracks_in_display_order(&t).iter().map(|t| t.label()).collect();
        assert_eq!(
            labels,
            ["actor pin", "actor assemble", "actor htod (gpu0)", "actor msm (gpu0)", "gpu0 stream compute"]
        );
    }
}
