//! Figures a person reads first about a run: time per stage, how busy each device was, how much
//! the partitions overlapped, and where the devices sat idle and why.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::recorder::{Span, Timeline};
use crate::stage::Stage;

/// Idle gaps no longer than this (in seconds) are scheduling noise, not worth reporting.
pub const IDLE_GAP_MIN_S: f64 = 1e-3;

/// How many idle gaps the human summary lists.
const GAPS_SHOWN: usize = 3;

/// The stages that run on a device; the others run on the host.
const DEVICE_STAGES: [Stage; 4] = [Stage::Htod, Stage::Ntt, Stage::Msm, Stage::Dtoh];

fn is_device_stage(stage: Stage) -> bool {
    DEVICE_STAGES.contains(&stage)
}

/// One stage of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StageRef {
    pub stage: Stage,
    pub partition: usize,
}

impl fmt::Display for StageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of partition {}", self.stage, self.partition)
    }
}

/// A stretch longer than [`IDLE_GAP_MIN_S`] during which a device did no work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleGap {
    pub device: usize,
    pub start_s: f64,
    pub end_s: f64,
    /// The work that ended the gap.
    pub next: StageRef,
    /// The span, on any track, that ended last before the device resumed: what it waited on.
    pub waiting_on: Option<StageRef>,
}

impl IdleGap {
    pub fn duration_s(&self) -> f64 {
        self.end_s - self.start_s
    }
}

impl fmt::Display for IdleGap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gpu{} idle {} from {}, before {}", self.device, ms(self.duration_s()), ms(self.start_s), self.next)?;
        if let Some(waiting_on) = &self.waiting_on {
            write!(f, ", waiting on {waiting_on}")?;
        }
        Ok(())
    }
}

/// What a timeline says about a run. Every figure is finite: an empty timeline gives zeros.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// From the first span's start to the last span's end.
    pub seconds_total: f64,
    /// Per stage name, summed over partitions; each partition's stage counts once (the union
    /// of its spans), from the device streams for device stages when they were recorded, else
    /// from the actors.
    pub stage_seconds: BTreeMap<String, f64>,
    /// Per device: the union of its work (stream spans of htod, ntt, msm and dtoh, or the
    /// device's actor spans of those stages when it has no stream spans) over the wall time
    /// from its first to its last work.
    pub busy_fraction: BTreeMap<usize, f64>,
    /// The fraction of the union of all work time (every stage but budget, which is waiting)
    /// during which at least two partitions were active in two different stages.
    pub overlap_fraction: f64,
    /// Per device, in time order, the gaps longer than [`IDLE_GAP_MIN_S`] in its work.
    pub idle_gaps: Vec<IdleGap>,
    /// Per device, the seconds of its idle gaps during which the partition that ended the gap
    /// was still being synthesized: the device waited on synthesis (zero for every device that
    /// never did).
    pub waited_on_synthesis_s: BTreeMap<usize, f64>,
}

/// Computes the [`Summary`] of a timeline.
pub fn summarize(t: &Timeline) -> Summary {
    let spans: Vec<&Span> = t.spans.iter().filter(|s| s.start_s.is_finite() && s.end_s.is_finite()).collect();
    let seconds_total =
        match (spans.iter().map(|s| s.start_s).reduce(f64::min), spans.iter().map(|s| s.end_s).reduce(f64::max)) {
            (Some(first), Some(last)) => (last - first).max(0.0),
            _ => 0.0,
        };

    let mut busy_fraction = BTreeMap::new();
    let mut idle_gaps = Vec::new();
    for (device, work) in device_work(&spans) {
        let busy = merge(work.iter().map(|s| (s.start_s, s.end_s)));
        let wall = match (busy.first(), busy.last()) {
            (Some(first), Some(last)) => last.1 - first.0,
            _ => 0.0,
        };
        busy_fraction.insert(device, ratio(total(&busy), wall));
        for pair in busy.windows(2) {
            let (gap_start, gap_end) = (pair[0].1, pair[1].0);
            if gap_end - gap_start > IDLE_GAP_MIN_S {
                idle_gaps.extend(idle_gap(device, gap_start, gap_end, &work, &spans));
            }
        }
    }

    // A gap's share that the partition resuming the device spent synthesizing: the overlap of
    // the gap with that partition's synthesis span. Not from the gap's start: a partition that
    // only began its synthesis (or merely passed through the stage, as a witness) late in the
    // gap kept the device waiting on something else before that (its placement, staging).
    let mut waited_on_synthesis_s: BTreeMap<usize, f64> = busy_fraction.keys().map(|&d| (d, 0.0)).collect();
    for gap in &idle_gaps {
        let overlap: f64 = spans
            .iter()
            .filter(|s| s.stage == Stage::Synthesize && s.partition == gap.next.partition)
            .map(|s| (s.end_s.min(gap.end_s) - s.start_s.max(gap.start_s)).max(0.0))
            .sum();
        *waited_on_synthesis_s.entry(gap.device).or_default() += overlap;
    }
    Summary {
        seconds_total,
        stage_seconds: stage_seconds(&spans),
        busy_fraction,
        overlap_fraction: overlap_fraction(&spans),
        idle_gaps,
        waited_on_synthesis_s,
    }
}

/// Each device's work spans: its device-stage stream spans, or, when it has none, its actors'
/// device-stage spans. A device with tracks but no work gets an empty list.
fn device_work<'a>(spans: &[&'a Span]) -> BTreeMap<usize, Vec<&'a Span>> {
    let mut streams: BTreeMap<usize, Vec<&Span>> = BTreeMap::new();
    let mut actors: BTreeMap<usize, Vec<&Span>> = BTreeMap::new();
    for span in spans {
        let Some(device) = span.track.device() else { continue };
        streams.entry(device).or_default();
        if is_device_stage(span.stage) {
            let by_kind = if span.track.is_device() { &mut streams } else { &mut actors };
            by_kind.entry(device).or_default().push(span);
        }
    }
    for (device, work) in streams.iter_mut() {
        if work.is_empty() {
            *work = actors.remove(device).unwrap_or_default();
        }
    }
    streams
}

fn idle_gap(device: usize, start_s: f64, end_s: f64, work: &[&Span], spans: &[&Span]) -> Option<IdleGap> {
    // The work that resumes at end_s (a merged interval starts at some span's start, so there
    // is always one).
    let next = work
        .iter()
        .filter(|s| s.start_s >= end_s)
        .min_by(|a, b| a.start_s.total_cmp(&b.start_s))
        .map(|s| StageRef { stage: s.stage, partition: s.partition })?;
    // What it waited on: the latest end at or before the resumption, on any track; on a tie,
    // the span of the partition that resumes says more.
    let waiting_on = spans
        .iter()
        .filter(|s| s.end_s <= end_s)
        .max_by(|a, b| {
            a.end_s.total_cmp(&b.end_s).then((a.partition == next.partition).cmp(&(b.partition == next.partition)))
        })
        .map(|s| StageRef { stage: s.stage, partition: s.partition });
    Some(IdleGap { device, start_s, end_s, next, waiting_on })
}

fn stage_seconds(spans: &[&Span]) -> BTreeMap<String, f64> {
    let mut by_partition_stage: BTreeMap<(usize, Stage), Vec<&Span>> = BTreeMap::new();
    for span in spans {
        by_partition_stage.entry((span.partition, span.stage)).or_default().push(span);
    }
    let mut seconds: BTreeMap<String, f64> = BTreeMap::new();
    for ((_, stage), group) in by_partition_stage {
        let from_streams = is_device_stage(stage) && group.iter().any(|s| s.track.is_device());
        let counted = group.iter().filter(|s| !from_streams || s.track.is_device()).map(|s| (s.start_s, s.end_s));
        *seconds.entry(stage.name().to_string()).or_default() += total(&merge(counted));
    }
    seconds
}

/// Sweeps over span boundaries, keeping how many spans of each partition and each stage are
/// active. Two partitions in two different stages are active exactly when at least two
/// partitions and at least two stages are: if every pair of active (partition, stage) shared
/// one or the other, one partition or one stage would be common to all of them.
fn overlap_fraction(spans: &[&Span]) -> f64 {
    let mut events: Vec<(f64, bool, &Span)> = Vec::with_capacity(2 * spans.len());
    for span in spans.iter().filter(|s| s.stage != Stage::Admission && s.end_s > s.start_s) {
        events.push((span.start_s, true, span));
        events.push((span.end_s, false, span));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));

    let mut partitions: BTreeMap<usize, usize> = BTreeMap::new();
    let mut stages: BTreeMap<Stage, usize> = BTreeMap::new();
    let (mut worked, mut overlapped) = (0.0, 0.0);
    let mut i = 0;
    while i < events.len() {
        let now = events[i].0;
        while i < events.len() && events[i].0 == now {
            let (_, starts, span) = events[i];
            adjust(&mut partitions, span.partition, starts);
            adjust(&mut stages, span.stage, starts);
            i += 1;
        }
        let Some(&(next, _, _)) = events.get(i) else { break };
        let dt = next - now;
        if !partitions.is_empty() {
            worked += dt;
            if partitions.len() >= 2 && stages.len() >= 2 {
                overlapped += dt;
            }
        }
    }
    ratio(overlapped, worked)
}

fn adjust<K: Ord>(counts: &mut BTreeMap<K, usize>, key: K, starts: bool) {
    if starts {
        *counts.entry(key).or_default() += 1;
    } else if let Some(count) = counts.get_mut(&key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(&key);
        }
    }
}

/// Sorted, disjoint intervals covering the non-empty input intervals.
fn merge(intervals: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut sorted: Vec<(f64, f64)> = intervals.filter(|(a, b)| b > a).collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(sorted.len());
    for (start, end) in sorted {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

fn total(intervals: &[(f64, f64)]) -> f64 {
    intervals.iter().map(|(a, b)| b - a).sum()
}

/// `part / whole`, or 0 when there is no whole to speak of.
fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        (part / whole).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

fn ms(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "total {}", ms(self.seconds_total))?;
        let stages: Vec<String> = Stage::ALL
            .iter()
            .filter_map(|s| self.stage_seconds.get(s.name()).map(|secs| format!("{s} {}", ms(*secs))))
            .collect();
        if !stages.is_empty() {
            writeln!(f, "stages: {}", stages.join(", "))?;
        }
        if !self.busy_fraction.is_empty() {
            let busy: Vec<String> =
                self.busy_fraction.iter().map(|(d, b)| format!("gpu{d} {:.1}%", b * 100.0)).collect();
            writeln!(f, "busy: {}", busy.join(", "))?;
        }
        let waited: Vec<String> = self
            .waited_on_synthesis_s
            .iter()
            .filter(|(_, s)| **s > 0.0)
            .map(|(d, s)| format!("gpu{d} {}", ms(*s)))
            .collect();
        match waited.is_empty() {
            true => writeln!(f, "no device waited on synthesis")?,
            false => writeln!(f, "waited on synthesis: {}", waited.join(", "))?,
        }
        writeln!(
            f,
            "overlap: {:.1}% of the work time had two partitions in different stages",
            self.overlap_fraction * 100.0
        )?;
        if self.idle_gaps.is_empty() {
            return writeln!(f, "no idle gaps over {}", ms(IDLE_GAP_MIN_S));
        }
        let mut largest: Vec<&IdleGap> = self.idle_gaps.iter().collect();
        largest.sort_by(|a, b| b.duration_s().total_cmp(&a.duration_s()));
        writeln!(f, "{} idle gaps over {}; the largest:", self.idle_gaps.len(), ms(IDLE_GAP_MIN_S))?;
        for gap in largest.into_iter().take(GAPS_SHOWN) {
            writeln!(f, "  {gap}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_joins_touching_and_overlapping_intervals() {
        let merged = merge([(3.0, 4.0), (0.0, 1.0), (1.0, 2.0), (3.5, 5.0), (6.0, 6.0)].into_iter());
        assert_eq!(merged, vec![(0.0, 2.0), (3.0, 5.0)]);
        assert_eq!(total(&merged), 4.0);
    }

    #[test]
    fn empty_timeline_gives_zeros() {
        let summary = summarize(&Timeline::default());
        assert_eq!(summary, Summary::default());
        assert!(summary.to_string().contains("total 0.000 ms"));
    }
}
