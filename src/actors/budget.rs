//! The memory-budget actor: one per device. It grants a partition's whole device-memory plan
//! before any of its stages starts, first come first served, and never over-commits.
//!
//! A [`Grant`] gives its bytes back when dropped: after success, after an error, and while a
//! panic unwinds. A plan larger than the device fails at once instead of waiting forever.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use actix::prelude::*;
use crossbeam_channel::{bounded, Receiver, Sender};

use crate::error::{Error, Result};

/// What the budget reports about itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BudgetReport {
    pub device: usize,
    pub capacity_bytes: u64,
    pub in_use_bytes: u64,
    pub peak_bytes: u64,
    /// Requests waiting for a grant.
    pub waiting: usize,
    pub grants_issued: u64,
}

/// The FIFO ledger behind the actor: pure bookkeeping, unit-tested on its own.
#[derive(Debug)]
pub struct BudgetLedger {
    device: usize,
    capacity_bytes: u64,
    in_use_bytes: u64,
    peak_bytes: u64,
    grants_issued: u64,
    /// Requests waiting, by rank (highest first), then in arrival order: (request id, bytes,
    /// where the grant goes, rank).
    waiting: VecDeque<(u64, u64, Sender<Grant>, u8)>,
}

impl BudgetLedger {
    pub fn new(device: usize, capacity_bytes: u64) -> BudgetLedger {
        BudgetLedger {
            device,
            capacity_bytes,
            in_use_bytes: 0,
            peak_bytes: 0,
            grants_issued: 0,
            waiting: VecDeque::new(),
        }
    }

    /// Queues a request behind every waiting request of its rank or higher, ahead of those of
    /// lower rank; grants are handed out from the head as room appears. A device's budget
    /// ranks every request alike (arrival order); the host budget ranks by priority, so that a
    /// critical request's synthesis (a Winning PoSt's, due within an epoch) does not wait
    /// behind a batch of PoRep partitions queued before it.
    fn enqueue(&mut self, id: u64, bytes: u64, reply: Sender<Grant>, rank: u8, releaser: &Releaser) {
        let at = self.waiting.iter().position(|&(.., waiting_rank)| waiting_rank < rank).unwrap_or(self.waiting.len());
        self.waiting.insert(at, (id, bytes, reply, rank));
        self.grant_waiting(releaser);
    }

    /// Takes a request out of the queue at once, wherever it stands: a requester that gave up
    /// must not hold back the requests behind it until room for its own bytes appears.
    fn withdraw(&mut self, id: u64, releaser: &Releaser) {
        self.waiting.retain(|(waiting, ..)| *waiting != id);
        self.grant_waiting(releaser);
    }

    /// Grants from the head of the queue while the head fits. The head is never skipped, so
    /// a large plan cannot starve behind a stream of small ones.
    fn grant_waiting(&mut self, releaser: &Releaser) {
        while let Some(&(_, bytes, ..)) = self.waiting.front() {
            if self.in_use_bytes + bytes > self.capacity_bytes {
                break;
            }
            let (_, bytes, reply, _) = self.waiting.pop_front().expect("front exists");
            self.in_use_bytes += bytes;
            self.peak_bytes = self.peak_bytes.max(self.in_use_bytes);
            self.grants_issued += 1;
            releaser.mirror(self.in_use_bytes, self.peak_bytes);
            let grant = Grant { device: self.device, bytes, releaser: Some(releaser.clone()) };
            // A requester that gave up dropped its receiver: take the bytes straight back here,
            // not through a message that a report could overtake.
            if let Err(refused) = reply.send(grant) {
                let mut grant = refused.into_inner();
                grant.releaser = None;
                self.in_use_bytes -= bytes;
                self.grants_issued -= 1;
                releaser.mirror(self.in_use_bytes, self.peak_bytes);
            }
        }
    }

    fn release(&mut self, bytes: u64, releaser: &Releaser) {
        self.in_use_bytes = self.in_use_bytes.saturating_sub(bytes);
        releaser.mirror(self.in_use_bytes, self.peak_bytes);
        self.grant_waiting(releaser);
    }

    fn report(&self) -> BudgetReport {
        BudgetReport {
            device: self.device,
            capacity_bytes: self.capacity_bytes,
            in_use_bytes: self.in_use_bytes,
            peak_bytes: self.peak_bytes,
            waiting: self.waiting.len(),
            grants_issued: self.grants_issued,
        }
    }
}

/// The actor that owns a device's ledger.
pub struct BudgetActor {
    ledger: BudgetLedger,
    releaser: Option<Releaser>,
    mirror: Arc<BudgetMirror>,
}

impl Actor for BudgetActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.releaser = Some(Releaser { addr: ctx.address(), mirror: self.mirror.clone() });
    }
}

/// Asks for `bytes`; the grant arrives on `reply` when it is this request's turn.
#[derive(Message)]
#[rtype(result = "()")]
struct RequestGrant {
    id: u64,
    bytes: u64,
    reply: Sender<Grant>,
    /// Higher ranks are queued ahead of lower ones (see `BudgetLedger::enqueue`).
    rank: u8,
}

/// Takes a waiting request out of the queue (sent by a dropped [`PendingGrant`]).
#[derive(Message)]
#[rtype(result = "()")]
struct Withdraw {
    id: u64,
}

/// Gives bytes back (sent by a dropped [`Grant`]).
#[derive(Message)]
#[rtype(result = "()")]
struct Release {
    bytes: u64,
}

/// Asks for a report; answered after every message sent before it.
#[derive(Message)]
#[rtype(result = "()")]
struct Report {
    reply: Sender<BudgetReport>,
}

impl Handler<RequestGrant> for BudgetActor {
    type Result = ();
    fn handle(&mut self, msg: RequestGrant, _: &mut Context<Self>) {
        let releaser = self.releaser.clone().expect("set when started");
        self.ledger.enqueue(msg.id, msg.bytes, msg.reply, msg.rank, &releaser);
    }
}

impl Handler<Withdraw> for BudgetActor {
    type Result = ();
    fn handle(&mut self, msg: Withdraw, _: &mut Context<Self>) {
        let releaser = self.releaser.clone().expect("set when started");
        self.ledger.withdraw(msg.id, &releaser);
    }
}

impl Handler<Release> for BudgetActor {
    type Result = ();
    fn handle(&mut self, msg: Release, _: &mut Context<Self>) {
        let releaser = self.releaser.clone().expect("set when started");
        self.ledger.release(msg.bytes, &releaser);
    }
}

impl Handler<Report> for BudgetActor {
    type Result = ();
    fn handle(&mut self, msg: Report, _: &mut Context<Self>) {
        let _ = msg.reply.send(self.ledger.report());
    }
}

/// Figures readable without a round trip to the actor (for progress and status).
#[derive(Debug, Default)]
struct BudgetMirror {
    in_use_bytes: AtomicU64,
    peak_bytes: AtomicU64,
}

/// How a grant finds its way back to the actor.
#[derive(Clone)]
struct Releaser {
    addr: Addr<BudgetActor>,
    mirror: Arc<BudgetMirror>,
}

impl Releaser {
    fn mirror(&self, in_use: u64, peak: u64) {
        self.mirror.in_use_bytes.store(in_use, Ordering::SeqCst);
        self.mirror.peak_bytes.store(peak, Ordering::SeqCst);
    }
}

/// Device memory granted to one partition (or one resident key). Dropping it releases it.
pub struct Grant {
    device: usize,
    bytes: u64,
    releaser: Option<Releaser>,
}

impl Grant {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    pub fn device(&self) -> usize {
        self.device
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if let Some(releaser) = self.releaser.take() {
            // If the actor system is already gone there is nobody left to tell.
            releaser.addr.do_send(Release { bytes: self.bytes });
        }
    }
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Grant({} bytes on device {})", self.bytes, self.device)
    }
}

/// A handle to a budget actor: a device's memory, or the host memory witnesses take.
#[derive(Clone)]
pub struct MemoryBudget {
    device: usize,
    /// The host-memory budget (its `device` is unused): a plan that can never fit is a witness
    /// larger than the host budget.
    host: bool,
    capacity_bytes: u64,
    addr: Addr<BudgetActor>,
    mirror: Arc<BudgetMirror>,
    next_request: Arc<AtomicU64>,
}

/// A request waiting for its turn; dropping it before the grant came withdraws the request
/// from the queue at once.
pub struct PendingGrant {
    id: u64,
    receiver: Receiver<Grant>,
    addr: Addr<BudgetActor>,
    granted: bool,
}

impl PendingGrant {
    /// Waits for the grant, giving up (and withdrawing) once `give_up` returns true.
    pub fn wait_unless(mut self, mut give_up: impl FnMut() -> bool) -> Option<Grant> {
        loop {
            match self.receiver.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok(grant) => return self.granted(grant),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) if !give_up() => continue,
                Err(_) => return None,
            }
        }
    }

    /// Waits for the grant, for the tests: at most a minute, then `None` (the test fails
    /// rather than hangs). The pipeline's waits go through [`Self::wait_unless`], whose owner
    /// can end them.
    #[cfg(test)]
    fn wait(self) -> Option<Grant> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        self.wait_unless(|| std::time::Instant::now() > deadline)
    }

    /// The grant, if it has already been made.
    pub fn try_take(&mut self) -> Option<Grant> {
        let grant = self.receiver.try_recv().ok()?;
        self.granted(grant)
    }

    fn granted(&mut self, grant: Grant) -> Option<Grant> {
        self.granted = true;
        Some(grant)
    }
}

impl Drop for PendingGrant {
    fn drop(&mut self) {
        if !self.granted {
            // A grant already on its way is dropped with the receiver and gives its bytes
            // back itself; the withdrawal then finds nothing to take out.
            self.addr.do_send(Withdraw { id: self.id });
        }
    }
}

impl MemoryBudget {
    /// Starts the budget actor of `device` on the current actix system.
    pub fn start(device: usize, capacity_bytes: u64) -> MemoryBudget {
        let mirror = Arc::new(BudgetMirror::default());
        let actor =
            BudgetActor { ledger: BudgetLedger::new(device, capacity_bytes), releaser: None, mirror: mirror.clone() };
        MemoryBudget { device, host: false, capacity_bytes, addr: actor.start(), mirror, next_request: Arc::default() }
    }

    /// Starts the prover-wide budget of host memory for synthesized witnesses.
    pub fn start_host(capacity_bytes: u64) -> MemoryBudget {
        MemoryBudget { host: true, ..MemoryBudget::start(usize::MAX, capacity_bytes) }
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Queues a request for `bytes` at the lowest rank, for the tests: the pipeline always
    /// says how urgent its request is ([`Self::request_ranked`]).
    #[cfg(test)]
    fn request(&self, bytes: u64) -> Result<PendingGrant> {
        self.request_ranked(bytes, 0)
    }

    /// Queues a request for `bytes` ahead of every waiting request of lower `rank` (behind
    /// those of its rank or higher); the head is never skipped. A plan that can never fit
    /// fails now.
    pub fn request_ranked(&self, bytes: u64, rank: u8) -> Result<PendingGrant> {
        if bytes > self.capacity_bytes && self.host {
            return Err(Error::WitnessExceedsHostBudget { needed_bytes: bytes, capacity_bytes: self.capacity_bytes });
        }
        if bytes > self.capacity_bytes {
            return Err(Error::PlanExceedsDevice {
                device: self.device,
                needed_bytes: bytes,
                capacity_bytes: self.capacity_bytes,
            });
        }
        let (reply, receiver) = bounded(1);
        let id = self.next_request.fetch_add(1, Ordering::SeqCst);
        self.addr.try_send(RequestGrant { id, bytes, reply, rank }).map_err(|_| Error::ShutDown)?;
        Ok(PendingGrant { id, receiver, addr: self.addr.clone(), granted: false })
    }

    /// The budget's state after every release sent before this call.
    pub fn report(&self) -> Result<BudgetReport> {
        let (reply, receiver) = bounded(1);
        self.addr.try_send(Report { reply }).map_err(|_| Error::ShutDown)?;
        receiver.recv_timeout(std::time::Duration::from_secs(10)).map_err(|_| Error::ShutDown)
    }

    /// Bytes in use right now, without a round trip (may lag by a message).
    pub fn in_use_bytes(&self) -> u64 {
        self.mirror.in_use_bytes.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::actors::system::ActorSystem;

    fn budget(capacity: u64) -> (ActorSystem, MemoryBudget) {
        let system = ActorSystem::start("budget-test").unwrap();
        let budget = system.run(move || MemoryBudget::start(0, capacity)).unwrap();
        (system, budget)
    }

    #[test]
    fn grants_in_fifo_order_and_never_over_commits() {
        let (_system, budget) = budget(100);
        let first = budget.request(60).unwrap().wait().unwrap();
        let mut big = budget.request(70).unwrap();
        let mut small = budget.request(10).unwrap();
        budget.report().unwrap(); // a barrier: the actor has handled every message sent before it
        assert!(big.try_take().is_none(), "70 bytes were granted beside 60 of 100");
        assert!(small.try_take().is_none(), "a later small request jumped the queue");
        drop(first);
        let big = big.wait().unwrap();
        let small = small.wait().unwrap();
        let report = budget.report().unwrap();
        assert_eq!(report.in_use_bytes, 80);
        assert_eq!(report.peak_bytes, 80);
        drop((big, small));
        let report = budget.report().unwrap();
        assert_eq!((report.in_use_bytes, report.waiting), (0, 0));
    }

    #[test]
    fn a_higher_rank_is_granted_before_lower_ranks_that_came_first() {
        let (_system, budget) = budget(100);
        let held = budget.request(100).unwrap().wait().unwrap();
        let first_normal = budget.request_ranked(50, 1).unwrap();
        let mut second_normal = budget.request_ranked(50, 1).unwrap();
        let critical = budget.request_ranked(50, 3).unwrap();
        budget.report().unwrap(); // a barrier: the actor has handled every message sent before it
        assert_eq!(budget.report().unwrap().waiting, 3);
        drop(held);
        let critical = critical.wait().unwrap();
        let first_normal = first_normal.wait().unwrap();
        budget.report().unwrap(); // a barrier: the actor has handled every message sent before it
                                  // The twin: within a rank, arrival order, and nothing beyond capacity.
        assert!(second_normal.try_take().is_none(), "a third grant of 50 beside 100 granted");
        drop((critical, first_normal));
        assert_eq!(second_normal.wait().unwrap().bytes(), 50);
    }

    #[test]
    fn a_plan_larger_than_the_device_fails_at_once() {
        let (_system, budget) = budget(100);
        match budget.request(101) {
            Err(Error::PlanExceedsDevice { needed_bytes: 101, capacity_bytes: 100, .. }) => {}
            other => panic!("expected PlanExceedsDevice, got {:?}", other.map(|_| ())),
        }
        // The twin at exactly capacity is granted.
        assert_eq!(budget.request(100).unwrap().wait().unwrap().bytes(), 100);
    }

    #[test]
    fn a_grant_is_released_when_a_panic_unwinds() {
        let (_system, budget) = budget(100);
        let grant = budget.request(100).unwrap().wait().unwrap();
        let panicked = std::thread::spawn(move || {
            let _held = grant;
            panic!("stage failed while holding its grant");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(budget.report().unwrap().in_use_bytes, 0);
        assert!(budget.request(100).unwrap().wait().is_some());
    }

    #[test]
    fn a_withdrawn_request_does_not_keep_its_bytes() {
        let (_system, budget) = budget(100);
        let held = budget.request(100).unwrap().wait().unwrap();
        let withdrawn = budget.request(50).unwrap();
        assert!(withdrawn.wait_unless(|| true).is_none());
        drop(held);
        let report = budget.report().unwrap();
        assert_eq!(report.in_use_bytes, 0, "a grant made to a withdrawn request leaked");
    }

    #[test]
    fn a_requester_that_gave_up_leaves_the_queue_at_once() {
        let (_system, budget) = budget(100);
        let _held = budget.request(60).unwrap().wait().unwrap();
        let gives_up = budget.request(70).unwrap();
        let behind = budget.request(10).unwrap();
        budget.report().unwrap(); // a barrier: the actor has handled every message sent before it
        assert_eq!(budget.report().unwrap().waiting, 2);
        // The 70 bytes can only come once the 60 are back; the 10 behind them fit now, and
        // must not wait for room the requester that gave up will never use.
        assert!(gives_up.wait_unless(|| true).is_none());
        let granted = behind.wait_unless({
            let started = std::time::Instant::now();
            move || started.elapsed() > Duration::from_secs(5)
        });
        assert_eq!(granted.as_ref().map(|g| g.bytes()), Some(10), "the request behind one that gave up kept waiting");
        let report = budget.report().unwrap();
        assert_eq!((report.in_use_bytes, report.waiting), (70, 0));
        // The twin: a request that did not give up still holds its place at the head.
        let mut head = budget.request(50).unwrap();
        let mut after = budget.request(5).unwrap();
        budget.report().unwrap(); // a barrier: the actor has handled every message sent before it
        assert!(head.try_take().is_none() && after.try_take().is_none(), "FIFO order must hold");
    }
}
