//! What a prover holds and how it stops: device status, leak accounting, and shutdown.

use super::*;

/// What a prover holds at one moment ([`Prover::held`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    /// Budget bytes granted beyond what resident keys hold.
    pub budget_leaked_bytes: u64,
    /// Budget bytes granted, resident keys included.
    pub budget_in_use_bytes: u64,
    /// Grant requests waiting for memory.
    pub waiting_grants: usize,
    /// Page-locked bytes that no idle staging buffer or resident key explains.
    pub pinned_leaked_bytes: u64,
    /// Host bytes page-locked through the prover, pooled buffers and keys included.
    pub pinned_bytes: u64,
    /// Device bytes allocated, resident keys included.
    pub device_bytes: u64,
    /// Proving keys resident on a device.
    pub resident_keys: usize,
    /// Requests submitted and not finished.
    pub unfinished_requests: usize,
    /// Host bytes the synthesis stage holds for witnesses of partitions in flight.
    pub synthesis_host_bytes: u64,
}

impl Held {
    /// Whether anything is held that no resident key or idle pooled buffer explains: budget,
    /// pinned memory, or a grant request still waiting.
    pub fn leaked(&self) -> bool {
        self.budget_leaked_bytes > 0
            || self.pinned_leaked_bytes > 0
            || self.waiting_grants > 0
            || self.synthesis_host_bytes > 0
    }

    /// Whether nothing at all is held: no grant, no pinned byte, no device byte, no key.
    pub fn is_nothing(&self) -> bool {
        *self == Held::default()
    }
}

/// How [`Prover::shutdown`] treats work in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Finish every request already submitted.
    Drain,
    /// Cancel every request; in-flight partitions release what they hold.
    Cancel,
}

impl Prover {
    /// The timeline recorded so far.
    pub fn timeline(&self) -> &TimelineRecorder {
        &self.timeline
    }

    pub fn faults(&self) -> &FaultInjector {
        &self.faults
    }

    /// Partitions in flight now.
    pub fn in_flight(&self) -> usize {
        self.limiter.in_flight()
    }

    /// Each device's budget, after every release already sent.
    /// After shutdown: as they stood when the actors stopped.
    pub fn budget_reports(&self) -> Result<Vec<BudgetReport>> {
        if let Some(last) = self.final_budgets.lock().clone() {
            return Ok(last);
        }
        self.pipelines.iter().map(|p| p.budget.report()).collect()
    }

    /// Bytes granted beyond what resident keys hold: 0 when the prover is idle.
    pub fn budget_leaked_bytes(&self) -> Result<u64> {
        let reports = self.budget_reports()?;
        Ok(reports
            .iter()
            .zip(&self.pipelines)
            .map(|(report, pipeline)| report.in_use_bytes.saturating_sub(pipeline.residency().1))
            .sum())
    }

    /// Pinned bytes that no idle staging buffer or resident key explains.
    pub fn pinned_leaked_bytes(&self) -> u64 {
        self.pipelines.iter().map(|p| p.pinned_leaked_bytes()).sum()
    }

    /// Every host range page-locked through this prover's pin table now, by any device.
    pub fn pinned_ranges(&self) -> Vec<crate::backend::HostRange> {
        self.host_pins.ranges()
    }

    /// Device bytes allocated now, per device (resident keys included).
    pub fn device_allocated_bytes(&self) -> Vec<u64> {
        self.devices.iter().map(|d| d.allocated_bytes()).collect()
    }

    /// The driver's free memory per device, where the backend reports it.
    pub fn device_free_bytes(&self) -> Vec<Option<u64>> {
        self.devices.iter().map(|d| d.free_bytes()).collect()
    }

    /// Each device's state: whether it takes work, is quarantined, and how often it was
    /// recovered.
    pub fn device_status(&self) -> Vec<DeviceStatus> {
        self.pipelines
            .iter()
            .map(|p| DeviceStatus {
                ordinal: p.ordinal,
                health: p.health(),
                quarantined: p.is_failing(),
                recoveries: p.recoveries(),
                in_flight: p.load(),
                memory_budget_bytes: p.budget.capacity_bytes(),
                keys: p
                    .key_plans()
                    .into_iter()
                    .map(|(key, plan)| KeyResidency {
                        resident: plan.resident.names(),
                        streamed: plan.resident.complement().names(),
                        resident_bytes: plan.resident_bytes(&key.vectors()),
                        chunk_points: plan.chunk_points,
                        partitions: plan.partitions,
                    })
                    .collect(),
            })
            .collect()
    }

    /// The devices this process can no longer use, with why: each one's recovery failed, so
    /// it takes no work for the rest of the prover's life. On CUDA that is what a sticky
    /// error (an illegal address, a trapping kernel) leads to, since the driver keeps the
    /// error until the process exits (see `docs/library.md`, "A GPU that breaks"). A node
    /// that sees this drains the prover and restarts the process to have the GPU back; an
    /// empty list means every device is healthy, quarantined or still recovering.
    pub fn needs_restart(&self) -> Vec<(usize, String)> {
        self.pipelines
            .iter()
            .filter_map(|p| match p.health() {
                DeviceHealth::OutOfService { cause } => Some((p.ordinal, cause)),
                _ => None,
            })
            .collect()
    }

    /// What the prover holds now, over all its devices: the canonical leak check. With nothing
    /// in flight, [`Held::leaked`] is false; with the keys evicted too (or after
    /// [`Prover::shutdown`]), [`Held::is_nothing`] is true.
    pub fn held(&self) -> Result<Held> {
        let reports = self.budget_reports()?;
        Ok(Held {
            budget_leaked_bytes: self.budget_leaked_bytes()?,
            budget_in_use_bytes: reports.iter().map(|r| r.in_use_bytes).sum(),
            waiting_grants: reports.iter().map(|r| r.waiting).sum(),
            pinned_leaked_bytes: self.pinned_leaked_bytes(),
            pinned_bytes: self.host_pins.ranges().iter().map(|r| r.len as u64).sum(),
            device_bytes: self.device_allocated_bytes().iter().sum(),
            resident_keys: self.residency().iter().map(|(keys, _)| keys).sum(),
            unfinished_requests: self.unfinished_requests(),
            // After every release sent so far; once the actors stopped, the last mirrored count.
            synthesis_host_bytes: self.host_budget.report().map_or(self.host_budget.in_use_bytes(), |r| r.in_use_bytes),
        })
    }

    /// Requests submitted and not yet finished (the finished ones are forgotten here).
    fn unfinished_requests(&self) -> usize {
        let mut requests = self.requests.lock();
        requests.retain(|r| r.upgrade().is_some_and(|r| !r.status().finished));
        requests.len()
    }

    /// Stops taking requests, drains or cancels what is in flight, and stops the actors,
    /// within a bound: `Drain` waits up to `shutdown_timeout` for the requests submitted and
    /// then cancels what is left; partitions still stuck after another `shutdown_timeout`
    /// (a hung device) are given up and fail with `ShutDown`, so no handle waits for ever.
    /// Says what it finished, cancelled and gave up on; a second call reports nothing.
    pub fn shutdown(&self, mode: Shutdown) -> ShutdownReport {
        let started = std::time::Instant::now();
        let live: Vec<Arc<RequestState>> = {
            let requests = self.requests.lock();
            if self.closing.swap(true, Ordering::SeqCst) {
                return ShutdownReport::default();
            }
            requests.iter().filter_map(|r| r.upgrade()).collect()
        };
        let bound = self.config.shutdown_timeout;
        let all_finished = |within: Duration| {
            let deadline = std::time::Instant::now() + within;
            live.iter().all(|r| r.wait_until(deadline))
        };
        let mut cancelled_by_shutdown = mode == Shutdown::Cancel;
        if mode == Shutdown::Cancel || !all_finished(bound) {
            cancelled_by_shutdown = true;
            live.iter().for_each(|r| r.cancel());
        }
        let mut report = ShutdownReport { requests: live.len(), ..ShutdownReport::default() };
        if !all_finished(bound) {
            for request in &live {
                report.abandoned += request.abandon(Error::ShutDown);
            }
        }
        for request in &live {
            let status = request.status();
            report.proved += status.proved;
            report.failed += status.failed;
        }
        report.cancelled = if cancelled_by_shutdown {
            live.iter().map(|r| r.count_failed_with(|e| matches!(e, Error::Cancelled | Error::ShutDown))).sum()
        } else {
            0
        };
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(scheduler) = self.scheduler.lock().take() {
            let _ = scheduler.join();
        }
        if let Some(health) = self.health.lock().take() {
            let _ = health.join();
        }
        let deadline = std::time::Instant::now() + bound;
        while self.limiter.in_flight() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        report.stuck_partitions = self.limiter.in_flight();
        // The cache's keys and page-locked vectors go before the devices are released.
        drop(self.key_cache.lock().clear());
        self.pipelines.iter().for_each(|p| {
            p.evict_key(None);
            p.pool.clear();
        });
        if let Ok(last) = self.pipelines.iter().map(|p| p.budget.report()).collect::<Result<Vec<_>>>() {
            *self.final_budgets.lock() = Some(last);
        }
        if let Some(system) = self.system.lock().take() {
            system.stop();
        }
        self.devices.iter().for_each(|d| d.release_cached());
        // A process that proves once and exits must not lose the matrices it recorded.
        let unwritten = crate::circuit::recording::finish_matrices_writes(bound);
        if unwritten > 0 {
            tracing::warn!(
                unwritten,
                "constraint matrices still being written at shutdown: the next process records them again"
            );
        }
        report.elapsed = started.elapsed();
        tracing::info!(?mode, ?report, "the prover has shut down");
        report
    }
}

/// One device as [`Prover::device_status`] sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceStatus {
    pub ordinal: usize,
    pub health: DeviceHealth,
    /// It failed partitions in a row: it gets work only when no other device can take it,
    /// until a probe proves on it.
    pub quarantined: bool,
    pub recoveries: usize,
    /// Partitions in flight on it.
    pub in_flight: usize,
    /// The device memory its budget plans with: the free memory at start, or the
    /// `device_memory_bytes` cap where smaller, less the reserve.
    pub memory_budget_bytes: u64,
    /// How each key resident on it is held.
    pub keys: Vec<KeyResidency>,
}

/// How a proving key is held on a device (see `plan::residency`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyResidency {
    /// The query vectors kept on the device (`h`, `l`, `a`, `b_g1`, `b_g2`).
    pub resident: Vec<&'static str>,
    /// The vectors streamed through chunk buffers for every partition.
    pub streamed: Vec<&'static str>,
    /// Device bytes of the resident vectors (its matrices not counted).
    pub resident_bytes: u64,
    /// Points per chunk of the streamed vectors (`None`: nothing streams).
    pub chunk_points: Option<usize>,
    /// Partitions of the key the plan leaves room for at once.
    pub partitions: usize,
}

/// What [`Prover::shutdown`] did with the work it found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShutdownReport {
    /// Requests unfinished when shutdown began.
    pub requests: usize,
    /// Their partitions that proved, failed (for any reason), and were cancelled or refused
    /// by the shutdown (counted in `failed` too).
    pub proved: usize,
    pub failed: usize,
    pub cancelled: usize,
    /// Partitions given up after the bound, still running on a device that never answered.
    pub abandoned: usize,
    /// Partitions still holding an in-flight place when the actors were stopped.
    pub stuck_partitions: usize,
    pub elapsed: Duration,
}

impl Drop for Prover {
    fn drop(&mut self) {
        let report = self.shutdown(Shutdown::Cancel);
        if report.requests > 0 {
            tracing::warn!(?report, "a prover dropped with requests unfinished cancelled them");
        }
    }
}
