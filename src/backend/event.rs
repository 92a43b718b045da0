//! Completion events that stages hand each other.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::Result;

/// A backend's own event. `as_any` lets the backend that made it reach its raw handle
/// (a CUDA stream waits on the CUevent itself, without the host).
pub trait EventSource: Send + Sync + 'static {
    /// Blocks the calling thread until the event has completed.
    fn wait(&self) -> Result<()>;
    /// Blocks until the event has completed or `timeout` has passed; whether it completed.
    fn wait_for(&self, timeout: Duration) -> Result<bool>;
    fn is_complete(&self) -> bool;
    /// When the event completed, on the host clock.
    fn completed_at(&self) -> Option<Instant>;
    fn as_any(&self) -> &dyn Any;
}

/// A point in a stream's work that other stages can wait for.
#[derive(Clone)]
pub struct StageEvent(Arc<dyn EventSource>);

impl StageEvent {
    pub fn new(source: Arc<dyn EventSource>) -> StageEvent {
        StageEvent(source)
    }

    /// An event that has already completed (for work with nothing to wait on).
    pub fn completed() -> StageEvent {
        let done = HostCompletion::new();
        done.complete();
        StageEvent(Arc::new(done))
    }

    pub fn wait(&self) -> Result<()> {
        self.0.wait()
    }
    /// Waits at most `timeout`; whether the event completed (false: the work behind it hangs).
    pub fn wait_within(&self, timeout: Duration) -> Result<bool> {
        self.0.wait_for(timeout)
    }
    pub fn is_complete(&self) -> bool {
        self.0.is_complete()
    }
    pub fn completed_at(&self) -> Option<Instant> {
        self.0.completed_at()
    }
    /// The backend's own event type, if it is `T`.
    pub fn source<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }
}

impl fmt::Debug for StageEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StageEvent(complete: {})", self.is_complete())
    }
}

/// An event completed by a host thread: the CPU model's streams use it.
#[derive(Default)]
pub struct HostCompletion {
    done: Mutex<Option<Instant>>,
    changed: Condvar,
}

impl HostCompletion {
    pub fn new() -> HostCompletion {
        HostCompletion::default()
    }

    /// Marks the event complete and wakes every waiter.
    pub fn complete(&self) {
        let mut done = self.done.lock();
        if done.is_none() {
            *done = Some(Instant::now());
        }
        self.changed.notify_all();
    }
}

impl EventSource for HostCompletion {
    fn wait(&self) -> Result<()> {
        let mut done = self.done.lock();
        while done.is_none() {
            self.changed.wait(&mut done);
        }
        Ok(())
    }
    fn wait_for(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        let mut done = self.done.lock();
        while done.is_none() {
            if self.changed.wait_until(&mut done, deadline).timed_out() {
                return Ok(done.is_some());
            }
        }
        Ok(true)
    }
    fn is_complete(&self) -> bool {
        self.done.lock().is_some()
    }
    fn completed_at(&self) -> Option<Instant> {
        *self.done.lock()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
