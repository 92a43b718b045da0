//! An in-order work queue driven by a host thread: the CPU model's streams run their work on
//! it, and the CUDA device's streams drive a CUDA stream from it. Each piece of a partition's
//! work is skipped once the partition has failed, is timed (on the device clock where the
//! backend reports device times), and turns an error or a panic into the partition's failure.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{unbounded, Sender};

use super::event::HostCompletion;
use super::{StageEvent, WorkTag};
use crate::error::{Error, Result};
use crate::timeline::{TimelineRecorder, Track};

type Job = Box<dyn FnOnce() + Send>;

/// When a piece of work ran, if the device measured it; `None` means "use host times".
pub type DeviceTimes = Option<(Instant, Instant)>;

/// A host thread running queued work in order.
pub struct HostQueue {
    device: usize,
    name: String,
    jobs: Sender<Job>,
    timeline: TimelineRecorder,
}

impl HostQueue {
    /// Starts the queue's thread; `setup` runs first on it (e.g. to bind a CUDA context).
    pub fn start(device: usize, name: &str, timeline: TimelineRecorder) -> Result<HostQueue> {
        let (jobs, queue) = unbounded::<Job>();
        std::thread::Builder::new()
            .name(format!("dev{device}-{name}"))
            .spawn(move || {
                for job in queue {
                    job();
                }
            })
            .map_err(|e| Error::io("starting a stream thread", e))?;
        Ok(HostQueue { device, name: name.to_string(), jobs, timeline })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn device(&self) -> usize {
        self.device
    }

    fn enqueue(&self, job: Job) -> Result<()> {
        self.jobs.send(job).map_err(|_| Error::Device {
            device: self.device,
            operation: "enqueue work",
            message: format!("stream {} has stopped", self.name),
        })
    }

    /// Queues a partition's work (see the module doc). When it starts, the work is told whether
    /// its partition is first in the device's line, the most urgent in flight and then the
    /// oldest (`AdmissionLine`; a GPU then runs it on its urgent stream), and its span on the
    /// timeline says so (`"oldest": true`, the name kept for the tools that read it). The queue
    /// itself stays in order: a stream's work must run in the order it was queued (its events
    /// mark everything before them), so urgency picks the stream, never the place in one.
    pub fn enqueue_work(
        &self,
        tag: &WorkTag,
        work: impl FnOnce(bool) -> Result<DeviceTimes> + Send + 'static,
    ) -> Result<()> {
        let tag = tag.clone();
        let timeline = self.timeline.clone();
        let track = Track::Stream { device: self.device, name: self.name.clone() };
        self.enqueue(Box::new(move || {
            if tag.failure.is_failed() {
                return;
            }
            let oldest = tag.seniority.is_oldest();
            let host_start = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| work(oldest)))
                .unwrap_or_else(|panic| Err(Error::Panicked { stage: tag.stage, message: panic_message(&panic) }));
            let (start, end) = match &outcome {
                Ok(Some(device_times)) => *device_times,
                _ => (host_start, Instant::now()),
            };
            let mut args = tag.args.clone();
            if oldest {
                args.insert("oldest".into(), true.into());
            }
            timeline.record(track, tag.stage, tag.timeline_partition, start, end, args);
            if let Err(err) = outcome {
                tag.fail(err);
            }
        }))
    }

    /// Later work waits until `event` has completed.
    pub fn wait_event(&self, event: &StageEvent) -> Result<()> {
        let event = event.clone();
        self.enqueue(Box::new(move || {
            // A failed partition is marked in its failure slot, not in the event.
            let _ = event.wait();
        }))
    }

    /// An event that completes when the queue reaches it.
    pub fn record_event(&self) -> Result<StageEvent> {
        let completion = Arc::new(HostCompletion::new());
        let done = completion.clone();
        self.enqueue(Box::new(move || done.complete()))?;
        Ok(StageEvent::new(completion))
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}
