//! Collects spans from every actor and device stream onto one host clock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use serde::Serialize;

use crate::stage::Stage;

/// Where a span ran: on an actor's thread (host time) or on a device stream (device time
/// mapped onto the host clock).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Track {
    /// An actor, e.g. `msm` worker 1 on device 0.
    Actor { name: String, device: Option<usize>, worker: Option<usize> },
    /// A device stream, e.g. device 0's compute stream of worker 1.
    Stream { device: usize, name: String },
}

impl Track {
    /// A readable label, used as the track's name in traces and charts.
    pub fn label(&self) -> String {
        match self {
            Track::Actor { name, device: Some(d), worker: Some(w) } => format!("actor {name} (gpu{d} w{w})"),
            Track::Actor { name, device: Some(d), worker: None } => format!("actor {name} (gpu{d})"),
            Track::Actor { name, .. } => format!("actor {name}"),
            Track::Stream { device, name } => format!("gpu{device} stream {name}"),
        }
    }

    /// Whether the span ran on a device (and so counts towards device busy time).
    pub fn is_device(&self) -> bool {
        matches!(self, Track::Stream { .. })
    }

    /// The device a track belongs to, if any.
    pub fn device(&self) -> Option<usize> {
        match self {
            Track::Actor { device, .. } => *device,
            Track::Stream { device, .. } => Some(*device),
        }
    }
}

/// One stage of one partition on one track, in seconds since the timeline's origin.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub track: Track,
    pub stage: Stage,
    pub partition: usize,
    pub start_s: f64,
    pub end_s: f64,
    /// Bytes, sizes and other details, shown as the span's `args` in the trace.
    pub args: BTreeMap<String, serde_json::Value>,
}

impl Span {
    pub fn duration_s(&self) -> f64 {
        (self.end_s - self.start_s).max(0.0)
    }
}

/// A shareable recorder: actors and streams push spans; the bench exports them at the end.
#[derive(Clone)]
pub struct TimelineRecorder {
    origin: Instant,
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Default for TimelineRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl TimelineRecorder {
    pub fn new() -> Self {
        TimelineRecorder { origin: Instant::now(), spans: Arc::new(Mutex::new(Vec::new())) }
    }

    /// The instant every span is measured from.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Seconds from the origin to `at` (0 for instants before it).
    pub fn seconds_since_origin(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.origin).as_secs_f64()
    }

    /// Records a span between two host instants.
    pub fn record(
        &self,
        track: Track,
        stage: Stage,
        partition: usize,
        start: Instant,
        end: Instant,
        args: BTreeMap<String, serde_json::Value>,
    ) {
        let span = Span {
            track,
            stage,
            partition,
            start_s: self.seconds_since_origin(start),
            end_s: self.seconds_since_origin(end),
            args,
        };
        self.spans.lock().push(span);
    }

    /// A snapshot of everything recorded so far, sorted by start time.
    pub fn snapshot(&self) -> Timeline {
        let mut spans = self.spans.lock().clone();
        spans.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        Timeline { spans }
    }
}

/// A finished timeline, ready to export or to analyse.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    pub spans: Vec<Span>,
}
