//! The 2 KiB PoRep with two partitions, in a binary of its own: filecoin-proofs caches
//! verifying keys per process by sector size alone, so in one process with the 1-partition
//! PoRep one of the two would be checked against the other's key.
#![cfg(feature = "filecoin")]

mod filecoin;

use snarkpipe::filecoin::ProofKind;

#[test]
fn porep_of_two_partitions() {
    let job = filecoin::job(ProofKind::Porep, 2);
    filecoin::check_kind(&job);
    filecoin::check_cli(&job, ProofKind::Porep);
}
