//! The recorded timeline of a run: one span per partition per stage, per actor and per
//! device stream, exported as a Chrome trace (Perfetto), an SVG Gantt chart and a summary.

pub mod chrome;
pub mod recorder;
pub mod summary;
pub mod svg;

pub use recorder::{Span, Timeline, TimelineRecorder, Track, DEFAULT_TIMELINE_SPANS};
pub use summary::{summarize, Summary};
