//! The bench's report as text.

use super::*;

/// The human summary printed without `--json`.
pub fn describe(report: &BenchReport) -> String {
    let mut out = String::new();
    #[cfg(feature = "filecoin")]
    if let Some(fc) = &report.filecoin {
        out += &filecoin_lines(report, fc);
    }
    if out.is_empty() {
        out = format!(
            "snarkpipe bench: {} partitions of 2^{} ({:?} witness, {:?} keys) on {} {:?} device(s), {} workers\n",
            report.partitions,
            report.log_n,
            report.witness,
            report.keys,
            report.devices,
            report.backend,
            report.workers
        );
    }
    if let Some(compat) = &report.compat {
        out += &format!(
            "  compat ({}, {} circuit(s) a call, {} calls): first call {:.3} s ({} key miss(es); {:.3} s beyond a steady call), \
             steady {:.3} s per partition; native {:.3} s per partition ({:.3} synthesis + {:.3} proving): \
             ratio {:.3} with synthesis on both sides, {:.3} to native proving alone; {} compat proofs verified, {} failed\n",
            compat.call,
            compat.batch,
            compat.calls.len(),
            compat.first_call_seconds,
            compat.first_call_key_misses,
            compat.first_call_extra_seconds,
            compat.steady_seconds_per_partition,
            compat.native_seconds_per_partition,
            compat.native_synthesis_seconds_per_partition,
            compat.native_proving_seconds_per_partition,
            compat.ratio,
            compat.ratio_to_native_proving,
            compat.verified,
            compat.failed
        );
    }
    out += &format!("  prover start {:.2} s", report.seconds_prover_start);
    for (device, startup) in report.device_startup.iter().enumerate() {
        out += &format!(
            "; GPU {device}: context {:.2} s, kernels {:.2} s from {}",
            startup.context_seconds, startup.kernels_seconds, startup.kernels_from
        );
    }
    out += "\n";
    out += &format!(
        "  key {:.1} s, warm-up {:.1} s ({} bytes of staging pinned)\n",
        report.seconds_key, report.seconds_warm_up, report.staging_bytes_pinned
    );
    if let Some(first) = report.seconds_to_first_proof {
        out += &format!("  first proof {first:.2} s after the process started\n");
    }
    if let Some(peak) = report.host_peak_bytes {
        out += &format!("  host memory peak {:.1} GiB\n", peak as f64 / (1u64 << 30) as f64);
    }
    out += &format!("  {:.3} s total, {:.3} s per partition\n", report.seconds_total, report.seconds_per_partition);
    if let Some(scaling) = &report.scaling {
        out += &format!(
            "  one device: {:.3} s per partition ({:.3} steady), {} verified; speedup {:.2}x ({:.2}x steady)\n",
            scaling.single_device_seconds_per_partition,
            scaling.single_device_steady_seconds_per_partition,
            scaling.single_device_verified,
            scaling.speedup,
            scaling.steady_speedup
        );
    }
    out += &format!(
        "  steady state (from the first NTT): {:.3} s per partition\n",
        report.steady_state.seconds_per_partition
    );
    if let Some(floor) = &report.device_floor {
        // the steady figure is over all devices; the floor is one device's
        let per_device = report.steady_state.seconds_per_partition * report.devices.max(1) as f64;
        out += &format!(
            "  device floor {:.3} s per partition on one device (steady state {:.2}x the floor): quotient {:.3}, H {:.3}, L {:.3}, A {:.3}, B G1 {:.3}, B G2 {:.3} s at {:.1} G Fr / {:.1} G Fp multiplications and {:.1} G Fp squarings a second\n",
            floor.total_s,
            per_device / floor.total_s.max(1e-12),
            floor.quotient_s,
            floor.h_msm_s,
            floor.l_msm_s,
            floor.a_msm_s,
            floor.b_g1_msm_s,
            floor.b_g2_msm_s,
            floor.rates.fr_mul_per_s / 1e9,
            floor.rates.fp_mul_per_s / 1e9,
            floor.rates.fp_sqr_per_s / 1e9
        );
    }
    if report.proofs_checked {
        out += &format!("  {} verified, {} failed\n", report.verified, report.failed);
    } else {
        out += &format!("  proofs NOT verified (random keys), {} failed\n", report.failed);
    }
    for (stage, figures) in &report.stages {
        out += &format!("  {stage:>9}: {:.3} s\n", figures.seconds);
    }
    out += &format!("  overlap {:.0}%", report.overlap_fraction * 100.0);
    for (device, busy) in &report.busy_fraction {
        out += &format!(", {device} busy {:.0}%", busy * 100.0);
    }
    out += &format!(
        "\n  budget peak {} of {} bytes, {} leaked; pinned leaked {} bytes\n",
        report.budget.peak_bytes, report.budget.capacity_bytes, report.budget.leaked_bytes, report.pinned.leaked_bytes
    );
    for resident in &report.residency {
        out += &format!(
            "  gpu{}: {} resident key(s), {} bytes of a {} byte budget; longest admission wait {:.3} s\n",
            resident.device, resident.keys, resident.bytes, resident.budget_bytes, resident.longest_admission_wait_s
        );
        for plan in &resident.plans {
            let streamed = match plan.chunk_points {
                Some(chunk) => format!("{} streamed in chunks of {chunk} points", plan.streamed.join(",")),
                None => "nothing streamed".to_string(),
            };
            out += &format!(
                "    key: {} resident ({} bytes), {streamed}; room for {} partition(s)\n",
                plan.resident.join(","),
                plan.resident_bytes,
                plan.partitions
            );
        }
    }
    out += &report.timeline_summary;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if report.faults.injected > 0 {
        out += &format!(
            "  faults: {} injected, {} partitions failed, {} cascaded\n",
            report.faults.injected, report.faults.failed_partitions, report.faults.cascaded
        );
    }
    out
}

/// The lines a Filecoin `--circuit` run starts its summary with.
#[cfg(feature = "filecoin")]
fn filecoin_lines(report: &BenchReport, fc: &filecoin::FilecoinFigures) -> String {
    let mut out = format!(
        "snarkpipe bench: {} job {} ({} partition(s) of {} constraints), {} repetition(s) on {} {:?} device(s), {} workers\n",
        fc.kind,
        fc.job.display(),
        fc.partitions_per_proof,
        fc.constraints_per_partition,
        fc.repetitions,
        report.devices,
        report.backend,
        report.workers
    );
    out += &format!(
        "  first repetition: key load {:.3} s ({} key miss(es)); {} key miss(es) in all\n",
        fc.first_key_load_seconds, fc.first_key_misses, fc.key_misses
    );
    out += &format!(
        "  per partition{}: synthesis {:.3}, queue {:.3}, gpu {:.3}, key {:.3} s; synthesis + queue + gpu {:.3} s; verify {:.3} s a proof\n",
        if fc.runs.len() > 1 { " from the second repetition on" } else { "" },
        fc.synthesis_seconds_per_partition,
        fc.queue_seconds_per_partition,
        fc.gpu_seconds_per_partition,
        fc.key_load_seconds_per_partition,
        fc.snarkpipe_total_seconds_per_partition,
        fc.verify_seconds_per_proof
    );
    match (fc.bellperson_total_seconds_per_partition, fc.speedup_over_bellperson) {
        (Some(total), Some(speedup)) => {
            out += &format!(
                "  bellperson on this machine's CPU (synthesis + proving): {total:.3} s per partition; snarkpipe {speedup:.2}x faster\n"
            )
        }
        _ => out += "  bellperson: no figure (its runs failed)\n",
    }
    out += &format!(
        "  filecoin-proofs accepted {} of {} proof(s) ({} failed); bellperson {} accepted, {} failed\n",
        fc.verified, fc.repetitions, fc.failed, fc.bellperson_verified, fc.bellperson_failed
    );
    out
}
