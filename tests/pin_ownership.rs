//! Page-locked memory is always owned: no range in the pin table may outlive the allocation it
//! lies in. A global allocator records every live allocation of 64 KiB or more; after each
//! compat call, with the caller's parameters dropped, every range the prover's pin table holds
//! must lie inside one of them. The circuit is sized so that everything the prover pins (the
//! key's five vectors and every pooled staging buffer) is at least that large.
//!
//! This is its own test binary because the allocator is process-wide.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bellperson::groth16::{generate_random_parameters, prepare_verifying_key, verify_proof};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::HostRange;
use snarkpipe::compat;

mod common;
use common::fresh_rng;

/// Allocations at least this large are recorded.
const TRACKED_BYTES: usize = 64 << 10;
/// How many tracked allocations can be live at once (a prover on the CPU model holds a few
/// hundred); past that the test cannot judge and says so.
const SLOTS: usize = 8192;

/// The live tracked allocations: `(address, size)` per slot, 0 for a free slot. Plain atomics
/// behind a spin lock, so that recording an allocation never allocates.
static ADDRS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static SIZES: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LOCKED: AtomicBool = AtomicBool::new(false);
static OVERFLOWED: AtomicBool = AtomicBool::new(false);

fn with_table<R>(f: impl FnOnce() -> R) -> R {
    while LOCKED.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        std::hint::spin_loop();
    }
    let result = f();
    LOCKED.store(false, Ordering::Release);
    result
}

fn record(addr: usize, size: usize) {
    with_table(|| match ADDRS.iter().position(|slot| slot.load(Ordering::Relaxed) == 0) {
        Some(i) => {
            SIZES[i].store(size, Ordering::Relaxed);
            ADDRS[i].store(addr, Ordering::Relaxed);
        }
        None => OVERFLOWED.store(true, Ordering::Relaxed),
    })
}

fn forget(addr: usize) {
    with_table(|| {
        if let Some(slot) = ADDRS.iter().find(|slot| slot.load(Ordering::Relaxed) == addr) {
            slot.store(0, Ordering::Relaxed);
        }
    })
}

/// Whether `range` lies wholly inside one live tracked allocation.
fn inside_a_live_allocation(range: HostRange) -> bool {
    with_table(|| {
        ADDRS.iter().zip(&SIZES).any(|(addr, size)| {
            let (addr, size) = (addr.load(Ordering::Relaxed), size.load(Ordering::Relaxed));
            addr != 0 && addr <= range.addr && range.addr + range.len <= addr + size
        })
    })
}

struct Tracking;

// A global allocator cannot be written without `unsafe`: the trait's methods are unsafe to
// call and to implement. Each one only forwards to `System` and records the result; the
// table above is safe code.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() && layout.size() >= TRACKED_BYTES {
            record(ptr as usize, layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() && layout.size() >= TRACKED_BYTES {
            record(ptr as usize, layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Forgotten before it is freed, so the table never lists freed memory as live.
        if layout.size() >= TRACKED_BYTES {
            forget(ptr as usize);
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.size() >= TRACKED_BYTES {
            forget(ptr as usize);
        }
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if moved.is_null() {
            // The old block is still there, and still live.
            if layout.size() >= TRACKED_BYTES {
                record(ptr as usize, layout.size());
            }
        } else if new_size >= TRACKED_BYTES {
            record(moved as usize, new_size);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

fn missing() -> SynthesisError {
    SynthesisError::AssignmentMissing
}

/// `n` public inputs x_i with y_i = x_i² and z_i = y_i² as aux variables. With n = 2100 every
/// query vector of the key and every staging buffer of a partition exceeds 64 KiB: 2101 inputs
/// (A-query inputs), 2100 of them in B, 4200 aux values, 4200 points in B (G2) and a domain of
/// 2^13 for 6301 constraints.
#[derive(Clone)]
struct Squares {
    xs: Vec<Option<Scalar>>,
}

impl Squares {
    fn random(rng: &mut ChaCha20Rng, n: usize) -> Squares {
        Squares { xs: (0..n).map(|_| Some(Scalar::random(&mut *rng))).collect() }
    }

    fn public_inputs(&self) -> Vec<Scalar> {
        self.xs.iter().map(|x| x.unwrap()).collect()
    }
}

impl Circuit<Scalar> for Squares {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (i, x_value) in self.xs.iter().enumerate() {
            let x = cs.alloc_input(|| format!("x {i}"), || x_value.ok_or_else(missing))?;
            let y_value = x_value.map(|x| x.square());
            let y = cs.alloc(|| format!("y {i}"), || y_value.ok_or_else(missing))?;
            let z = cs.alloc(|| format!("z {i}"), || y_value.map(|y| y.square()).ok_or_else(missing))?;
            cs.enforce(|| format!("x*x {i}"), |lc| lc + x, |lc| lc + x, |lc| lc + y);
            cs.enforce(|| format!("y*y {i}"), |lc| lc + y, |lc| lc + y, |lc| lc + z);
        }
        Ok(())
    }
}

/// Every range the default prover's pin table holds, each checked against the live
/// allocations; returns how many there were.
fn assert_every_pinned_range_is_live(after: &str) -> usize {
    let ranges = compat::default_prover().expect("the default prover starts").pinned_ranges();
    assert!(!OVERFLOWED.load(Ordering::SeqCst), "the allocation table overflowed: the test cannot judge");
    let dead: Vec<HostRange> = ranges.iter().copied().filter(|r| !inside_a_live_allocation(*r)).collect();
    assert!(
        dead.is_empty(),
        "after {after}: {} of {} pinned ranges lie in freed memory: {dead:x?}",
        dead.len(),
        ranges.len()
    );
    ranges.len()
}

#[test]
fn every_pinned_range_lies_in_live_memory_after_the_caller_drops_its_parameters() {
    std::env::set_var("SNARKPIPE_BACKEND", "cpu");
    let mut rng = fresh_rng();

    for call in ["the first call", "the second call"] {
        let circuit = Squares::random(&mut rng, 2100);
        // A setup of its own per call: the second call's key is not the first's.
        let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let proof = compat::create_proof(circuit.clone(), &params, r, s).expect("snarkpipe proves");
        let pvk = prepare_verifying_key(&params.vk);
        assert!(verify_proof(&pvk, &proof, &circuit.public_inputs()).unwrap(), "{call}: the proof does not verify");
        // The caller is done with its parameters, as a node is between proofs.
        drop((params, pvk));
        let pinned = assert_every_pinned_range_is_live(call);
        // The twin: the check has something to judge, the key's five vectors at least.
        assert!(pinned >= 5, "after {call}: only {pinned} ranges pinned; the key's vectors were not");
    }
}
