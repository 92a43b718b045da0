//! Collects spans from every actor and device stream onto one host clock.

use std::collections::{BTreeMap, VecDeque};
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

/// Spans a recorder keeps by default: the last few thousand partitions' worth, tens of MB. A
/// node proves for months; its timeline must not grow with it.
pub const DEFAULT_TIMELINE_SPANS: usize = 1 << 17;

/// A shareable recorder: actors and streams push spans; the bench exports them at the end.
/// It is a ring: past its capacity each new span pushes out the oldest.
#[derive(Clone)]
pub struct TimelineRecorder {
    origin: Instant,
    spans: Arc<Mutex<SpanRing>>,
}

struct SpanRing {
    spans: VecDeque<Span>,
    capacity: usize,
    dropped: u64,
}

impl Default for TimelineRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl TimelineRecorder {
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_TIMELINE_SPANS)
    }

    /// A recorder that keeps the last `capacity` spans (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        let ring = SpanRing { spans: VecDeque::new(), capacity: capacity.max(1), dropped: 0 };
        TimelineRecorder { origin: Instant::now(), spans: Arc::new(Mutex::new(ring)) }
    }

    /// Spans pushed out of the ring by newer ones so far.
    pub fn dropped_spans(&self) -> u64 {
        self.spans.lock().dropped
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
        let mut ring = self.spans.lock();
        if ring.spans.len() >= ring.capacity {
            ring.spans.pop_front();
            ring.dropped += 1;
        }
        ring.spans.push_back(span);
    }

    /// A snapshot of the spans the ring holds (the latest), sorted by start time.
    pub fn snapshot(&self) -> Timeline {
        let mut spans: Vec<Span> = self.spans.lock().spans.iter().cloned().collect();
        spans.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        Timeline { spans }
    }
}

/// A finished timeline, ready to export or to analyse.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    pub spans: Vec<Span>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_latest_spans_and_counts_the_rest() {
        let recorder = TimelineRecorder::with_capacity(100);
        let at = Instant::now();
        for partition in 0..250 {
            let track = Track::Actor { name: "pin".into(), device: Some(0), worker: None };
            recorder.record(track, Stage::Pin, partition, at, at, BTreeMap::new());
        }
        let kept: Vec<usize> = recorder.snapshot().spans.iter().map(|s| s.partition).collect();
        assert_eq!(kept.len(), 100);
        assert_eq!(kept.iter().min(), Some(&150), "the oldest went first");
        assert_eq!(recorder.dropped_spans(), 150);
        // The negative twin: below its capacity nothing is dropped.
        let roomy = TimelineRecorder::with_capacity(1000);
        roomy.record(Track::Stream { device: 0, name: "htod".into() }, Stage::Htod, 0, at, at, BTreeMap::new());
        assert_eq!((roomy.snapshot().spans.len(), roomy.dropped_spans()), (1, 0));
    }
}
