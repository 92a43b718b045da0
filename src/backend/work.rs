//! What travels with each piece of device work: whose it is, and where its failure goes.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use blstrs::{G1Projective, G2Projective};
use group::Group;

use crate::math::MsmResults;
use crate::stage::Stage;

/// Where an MSM writes its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsmSlot {
    H,
    L,
    A,
    BG1,
    BG2,
}

/// The first failure of a partition's device work. Later work of the same partition sees it
/// and is skipped, so a failure stays inside its partition and names where it happened.
#[derive(Clone, Default)]
pub struct FailureSlot(Arc<OnceLock<Error>>);

impl FailureSlot {
    pub fn new() -> FailureSlot {
        FailureSlot::default()
    }
    /// Records `err` unless an earlier failure is already recorded.
    pub fn fail(&self, err: Error) {
        let _ = self.0.set(err);
    }
    pub fn failure(&self) -> Option<Error> {
        self.0.get().cloned()
    }
    pub fn is_failed(&self) -> bool {
        self.0.get().is_some()
    }
    /// Ok, or the recorded failure.
    pub fn check(&self) -> Result<()> {
        match self.0.get() {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for FailureSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FailureSlot({:?})", self.0.get())
    }
}

/// The partitions a device has admitted and not yet finished, the most urgent first, then in
/// the order it admitted them. A GPU runs the first one's work ahead of the others' (on a
/// high-priority stream), so that it finishes, and frees its memory for the next partition's
/// upload, as early as it would alone; the others fill the gaps. Without this, partitions in
/// flight share the GPU evenly, finish together, and the next ones' uploads find the GPU idle.
/// Urgency first: a Winning PoSt's partition admitted behind PoRep partitions takes the
/// high-priority stream from them, since its deadline is the one that costs.
#[derive(Default)]
pub struct AdmissionLine {
    waiting: Arc<Mutex<BTreeSet<Place>>>,
    next: AtomicU64,
}

/// A place in the line: higher urgency first, then the older.
type Place = (Reverse<u8>, u64);

impl AdmissionLine {
    /// Puts a partition at the back of the line; it leaves when the ticket is dropped.
    pub fn admit(&self) -> AdmissionTicket {
        self.admit_ranked(0)
    }

    /// Puts a partition of `urgency` (higher is more urgent: a request's priority as a
    /// number) behind the partitions of its urgency or more, ahead of the less urgent ones.
    pub fn admit_ranked(&self, urgency: u8) -> AdmissionTicket {
        let place = (Reverse(urgency), self.next.fetch_add(1, Ordering::SeqCst));
        self.waiting.lock().insert(place);
        AdmissionTicket { place: Seniority(Some((place, self.waiting.clone()))) }
    }
}

/// A partition's place in its device's [`AdmissionLine`], held while it is in flight.
pub struct AdmissionTicket {
    place: Seniority,
}

impl AdmissionTicket {
    /// What the partition's work carries to ask whether it is the oldest.
    pub fn seniority(&self) -> Seniority {
        self.place.clone()
    }
}

impl Drop for AdmissionTicket {
    fn drop(&mut self) {
        if let Some((seq, waiting)) = &self.place.0 {
            waiting.lock().remove(seq);
        }
    }
}

/// Whether a piece of work belongs to the first partition in its device's line (the most
/// urgent, then the oldest: [`AdmissionLine`]), asked when the work starts (not when it is
/// queued). Work without a place is never first.
#[derive(Clone, Default)]
pub struct Seniority(Option<(Place, Arc<Mutex<BTreeSet<Place>>>)>);

impl Seniority {
    /// Whether it is first in line (the name predates urgency: among partitions of one
    /// urgency, the first is the oldest).
    pub fn is_oldest(&self) -> bool {
        self.0.as_ref().is_some_and(|(place, waiting)| waiting.lock().first() == Some(place))
    }
}

impl fmt::Debug for Seniority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(((urgency, seq), _)) => {
                write!(f, "Seniority(#{seq}, urgency {}, first: {})", urgency.0, self.is_oldest())
            }
            None => write!(f, "Seniority(none)"),
        }
    }
}

/// Whose work this is: the partition, the stage, details for the timeline, the failure slot.
#[derive(Clone, Debug)]
pub struct WorkTag {
    /// The partition's index in its request (what errors name).
    pub partition: usize,
    /// The prover-wide partition id the timeline draws the work under.
    pub timeline_partition: usize,
    pub stage: Stage,
    pub args: BTreeMap<String, serde_json::Value>,
    pub failure: FailureSlot,
    /// Whether the partition is the oldest in flight on the device when the work starts.
    pub seniority: Seniority,
}

impl WorkTag {
    pub fn new(partition: usize, stage: Stage, failure: &FailureSlot) -> WorkTag {
        WorkTag {
            partition,
            timeline_partition: partition,
            stage,
            args: BTreeMap::new(),
            failure: failure.clone(),
            seniority: Seniority::default(),
        }
    }
    /// Draws the work on the timeline under the prover-wide id `partition_id`, so the spans
    /// of different requests' partitions stay apart.
    pub fn drawn_as(mut self, partition_id: usize) -> WorkTag {
        self.timeline_partition = partition_id;
        self
    }
    /// Ranks the work by its partition's place in the device's admission line.
    pub fn ranked(mut self, seniority: Seniority) -> WorkTag {
        self.seniority = seniority;
        self
    }
    /// Adds a detail shown in the trace (bytes, sizes).
    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> WorkTag {
        self.args.insert(key.to_string(), value.into());
        self
    }
    /// Records a failure of this work, wrapped with its stage and partition.
    pub fn fail(&self, err: Error) {
        self.failure.fail(err.in_stage(self.partition, self.stage));
    }
}

/// The five MSM results of a partition as they are filled in, one slot at a time.
#[derive(Debug, Default, Clone, Copy)]
pub struct MsmResultSlots {
    h: Option<G1Projective>,
    l: Option<G1Projective>,
    a: Option<G1Projective>,
    b_g1: Option<G1Projective>,
    b_g2: Option<G2Projective>,
}

impl MsmResultSlots {
    /// Adds a G1 result (one MSM, or one chunk of a streamed key's MSM) into its slot;
    /// `MsmSlot::BG2` takes a G2 point and is refused here.
    pub fn add_g1(&mut self, slot: MsmSlot, sum: G1Projective) -> Result<()> {
        let target = match slot {
            MsmSlot::H => &mut self.h,
            MsmSlot::L => &mut self.l,
            MsmSlot::A => &mut self.a,
            MsmSlot::BG1 => &mut self.b_g1,
            MsmSlot::BG2 => return Err(Error::Internal("a G1 result for the G2 slot".into())),
        };
        *target = Some(target.unwrap_or(G1Projective::identity()) + sum);
        Ok(())
    }

    /// Adds a G2 result into the b slot.
    pub fn add_b_g2(&mut self, sum: G2Projective) {
        self.b_g2 = Some(self.b_g2.unwrap_or(G2Projective::identity()) + sum);
    }

    /// All five results, or an error naming the MSM that did not run.
    pub fn complete(&self, device: usize) -> Result<MsmResults> {
        let missing = |what: &str| Error::Device {
            device,
            operation: "copy results to host",
            message: format!("the {what} MSM did not run"),
        };
        Ok(MsmResults {
            h: self.h.ok_or_else(|| missing("h"))?,
            l: self.l.ok_or_else(|| missing("l"))?,
            a: self.a.ok_or_else(|| missing("a"))?,
            b_g1: self.b_g1.ok_or_else(|| missing("b_g1"))?,
            b_g2: self.b_g2.ok_or_else(|| missing("b_g2"))?,
        })
    }
}

/// MSM results on their way to the host: read them after the stream passed the copy.
pub struct PendingResults(Box<dyn FnOnce() -> Result<MsmResults> + Send>);

impl PendingResults {
    pub fn new(read: impl FnOnce() -> Result<MsmResults> + Send + 'static) -> PendingResults {
        PendingResults(Box::new(read))
    }
    /// Reads the results; call only after the event recorded after the copy has completed.
    pub fn read(self) -> Result<MsmResults> {
        (self.0)()
    }
}

impl fmt::Debug for PendingResults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PendingResults")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_admitted_partition_in_flight_is_the_only_senior_one() {
        let line = AdmissionLine::default();
        let (first, second, third) = (line.admit(), line.admit(), line.admit());
        let ranks = |t: &[&AdmissionTicket]| t.iter().map(|t| t.seniority().is_oldest()).collect::<Vec<_>>();
        assert_eq!(ranks(&[&first, &second, &third]), [true, false, false]);
        // A seniority asked later sees the line as it is then.
        let asked_early = third.seniority();
        drop(first);
        assert_eq!(ranks(&[&second, &third]), [true, false]);
        drop(second);
        assert!(asked_early.is_oldest(), "the third is the oldest once the first two are done");
        let fourth = line.admit();
        assert!(!fourth.seniority().is_oldest(), "a newer admission never overtakes an older one");
        drop(third);
        assert!(!asked_early.is_oldest(), "a finished partition's work is no longer the oldest");
        assert!(fourth.seniority().is_oldest());
        assert!(!Seniority::default().is_oldest(), "work without a place is never the oldest");
    }

    #[test]
    fn an_urgent_partition_admitted_later_goes_first_and_then_the_oldest_again() {
        let line = AdmissionLine::default();
        let (porep, porep_later) = (line.admit_ranked(1), line.admit_ranked(1));
        assert!(porep.seniority().is_oldest());
        let winning = line.admit_ranked(3);
        assert!(winning.seniority().is_oldest(), "a critical partition stayed behind normal ones");
        assert!(!porep.seniority().is_oldest() && !porep_later.seniority().is_oldest());
        // Among equals, the older first; and a less urgent one never overtakes.
        let window = line.admit_ranked(2);
        let low = line.admit_ranked(0);
        drop(winning);
        assert!(window.seniority().is_oldest());
        drop(window);
        assert!(porep.seniority().is_oldest() && !low.seniority().is_oldest());
    }
}
