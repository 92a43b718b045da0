//! `snarkpipe serve`: the daemon's process. It binds its listener (a Unix socket, or a TCP
//! address that must be loopback unless `--allow-remote`), starts the prover and the workers,
//! serves until SIGTERM or SIGINT, and then shuts down within a bound: no new jobs, queued
//! ones cancelled, running ones given `--shutdown-grace-secs` to finish and cancelled after.
//! When a GPU breaks for the rest of the process, it restarts itself instead ([`super::restart`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_stream::wrappers::TcpListenerStream;

use super::jobs::{CarriedJob, Job, JobLimits, JobState, JobTable};
use super::pb::proving_service_server::ProvingServiceServer;
use super::restart::{self, RestartPolicy, Restarts};
use super::service::ProvingDaemon;
use super::worker::{start_workers_with_reserve, SrsTable, Workshop};
use crate::backend::{BackendKind, DeviceSelection};
use crate::filecoin::params::use_parameter_dir;
use crate::filecoin::KeyName;
use crate::prover::{Prover, ProverConfig, Shutdown};
use crate::{Error, Result};

/// The flags of `snarkpipe serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// `unix:PATH` for a Unix socket, or `HOST:PORT` for TCP (port 0 picks a free one).
    #[arg(long)]
    pub listen: String,
    /// Allow a TCP address other than loopback. The service has no authentication: anyone who
    /// reaches it can make the machine prove.
    #[arg(long)]
    pub allow_remote: bool,
    /// Serve HTTP `GET /metrics` (Prometheus' text format) and `GET /status` (GetStatus as
    /// JSON) on this TCP address: `PORT` alone is `127.0.0.1:PORT`, port 0 picks a free one
    /// (the ready line names it). Off unless set; an address other than loopback needs
    /// `--allow-remote`. See docs/metrics.md.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// The node's parameter directory (`FIL_PROOFS_PARAMETER_CACHE`).
    #[arg(long)]
    pub params_dir: PathBuf,
    /// `all`, or device ordinals (`0,2`).
    #[arg(long, default_value = "all")]
    pub devices: DeviceSelection,
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,
    /// Jobs proven at once (default: two per device, so that one job's synthesis overlaps
    /// another's proving).
    #[arg(long)]
    pub concurrent_jobs: Option<usize>,
    /// Largest vanilla proof a submit may carry (a 32 GiB PoRep's C1 output is tens of MB).
    #[arg(long, default_value_t = 512 << 20)]
    pub max_vanilla_bytes: usize,
    /// Cap on the device memory each device's budget plans with, in bytes or with a unit
    /// (`24GiB`, `16GB`): to share a card, or to emulate a smaller one. Keys that do not fit
    /// beside a partition are kept partly resident and streamed (see `snarkpipe::plan`).
    #[arg(long, value_parser = crate::plan::parse_bytes)]
    pub device_memory: Option<u64>,
    /// Jobs that may wait for a worker; a submit beyond it is refused.
    #[arg(long, default_value_t = JobLimits::default().max_queued)]
    pub max_queued: usize,
    /// Bytes of vanilla proofs that may wait for a worker together; a submit beyond it is
    /// refused (the count bound alone would let 4096 queued PoRep blobs hold hundreds of GB).
    #[arg(long, default_value_t = JobLimits::default().max_queued_bytes)]
    pub max_queued_bytes: u64,
    /// Workers kept for high and critical jobs (Window and Winning PoSt), beside the
    /// `--concurrent-jobs` that take any: such a job starts at once even while PoReps hold
    /// every other worker (default: one per device).
    #[arg(long)]
    pub urgent_workers: Option<usize>,
    /// Finished jobs kept for AwaitProof and idempotent resubmits, by count and by age.
    #[arg(long, default_value_t = JobLimits::default().keep_finished)]
    pub keep_finished: usize,
    #[arg(long, default_value_t = JobLimits::default().keep_for.as_secs())]
    pub keep_finished_secs: u64,
    /// How long a stage waits for a partition's device work before it calls the device hung
    /// (the prover's watchdog). Unset: the backend's own, two minutes on a GPU and an hour on
    /// the CPU backend (`snarkpipe::prover::default_stage_timeout`).
    #[arg(long)]
    pub stage_timeout_secs: Option<u64>,
    /// On SIGTERM, how long running jobs may take to finish before they are cancelled. The
    /// whole shutdown takes at most [`shutdown_bound`] of it.
    #[arg(long, default_value_t = 30)]
    pub shutdown_grace_secs: u64,
    /// Keys loaded from the parameter directory and made resident on the devices before the
    /// daemon serves, by kind and sector size: `porep-32g,snap-32g,window-post-32g,winning-post-32g`
    /// (sizes 2k, 8m, 512m, 32g, 64g). Each key's constraint matrices are recorded from the
    /// kind's blank circuit, so the first proof synthesizes witness-only; for 32 GiB PoRep
    /// that recording takes a core-minute or more and host memory of the order of the key.
    #[arg(long, value_delimiter = ',')]
    pub preload: Vec<KeyName>,
    /// Vanilla job files (as `snarkpipe prove --vanilla` reads them) proven once before the
    /// daemon serves: a check that the daemon proves and verifies on this machine before it
    /// takes calls, which also leaves the jobs' keys hot.
    #[arg(long, value_delimiter = ',')]
    pub preload_job: Vec<PathBuf>,
    /// When a GPU breaks for the rest of the process (a sticky CUDA error), replace the process
    /// with a fresh one (same PID and arguments) once the running jobs have ended, carrying the
    /// queued jobs and those the GPU failed over under their ids. `false`: the GPU stays out of
    /// service and the jobs it failed fail.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub restart_when_broken: bool,
}

/// Where the daemon listens.
enum Listen {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

fn parse_listen(args: &ServeArgs) -> Result<Listen> {
    if let Some(path) = args.listen.strip_prefix("unix:") {
        return Ok(Listen::Unix(PathBuf::from(path)));
    }
    let addr: SocketAddr = args
        .listen
        .parse()
        .map_err(|e| Error::Config(format!("--listen {:?} is neither unix:PATH nor HOST:PORT: {e}", args.listen)))?;
    if !addr.ip().is_loopback() && !args.allow_remote {
        return Err(Error::Config(format!(
            "--listen {addr} is not a loopback address; the service has no authentication, so serving other \
             machines needs --allow-remote (and a network that only trusted callers reach)"
        )));
    }
    Ok(Listen::Tcp(addr))
}

/// A socket file left by a daemon that was killed is removed; one that a live daemon serves
/// on is not taken over, and a path that is not a socket at all (a mistyped `--listen` that
/// names a file of the node's) is never deleted.
fn clear_stale_socket(path: &Path) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
    if !meta.file_type().is_socket() {
        return Err(Error::Config(format!(
            "--listen unix:{} names an existing path that is not a socket; it is left alone: give the daemon a \
             path of its own",
            path.display()
        )));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(Error::Config(format!("another process already serves on {}", path.display())));
    }
    tracing::warn!(path = %path.display(), "removing the stale socket of an earlier run");
    std::fs::remove_file(path).map_err(|e| Error::io(format!("removing the stale socket {}", path.display()), e))
}

/// The mode of the daemon's Unix socket: owner and group read and write, as the sample unit
/// promises (clients are put in the daemon's group), others nothing.
pub const SOCKET_MODE: u32 = 0o660;

/// Removes the temporary files a matrices writer killed mid-write left in `dir` (each named
/// for its process, so a restart never overwrites the last one's; of a large key, gigabytes
/// each). Only those of processes that no longer run, or of this PID (a restart's exec keeps
/// it): another process may be writing its own beside them now. Returns the paths removed.
pub fn remove_stale_matrices_temporaries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let own = std::process::id();
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // `<params>.snarkpipe-matrices.<pid>.tmp`: see `ConstraintMatrices::write_file`.
        let Some(pid) = name
            .strip_suffix(".tmp")
            .and_then(|rest| rest.rsplit_once(".snarkpipe-matrices."))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let gone = pid == own || !Path::new(&format!("/proc/{pid}")).exists();
        if gone && entry.file_type().is_ok_and(|t| t.is_file()) && std::fs::remove_file(entry.path()).is_ok() {
            tracing::warn!(path = %entry.path().display(), "removed the matrices a killed writer left half-written");
            removed.push(entry.path());
        }
    }
    removed
}

/// How long the prover's own shutdown may wait for its partitions, twice over (drain, then
/// the stuck ones): the jobs were already stopped by [`drain`], so this is for a hung device.
const PROVER_STOP: Duration = Duration::from_secs(10);
/// How long the workers get to return once their jobs ended or were given up: a worker
/// still loading a key (which nothing can stop mid-read) is left to the process's exit.
const WORKERS_STOP: Duration = Duration::from_secs(5);
/// How long calls still in flight when the server stops get to finish (a PreloadSRS
/// loading a key) before the server is dropped with them.
const CALLS_STOP: Duration = Duration::from_secs(5);

/// The longest a SIGTERM's shutdown takes with `--shutdown-grace-secs` `grace`: the grace for
/// the running jobs, as long again for a cancel to take, the calls, the workers and the
/// prover's stop. A supervisor's stop timeout (systemd's `TimeoutStopSec`) must exceed it.
pub fn shutdown_bound(grace: Duration) -> Duration {
    2 * grace + CALLS_STOP + WORKERS_STOP + 2 * PROVER_STOP + Duration::from_secs(5)
}

/// What the shutdown did, as `serve` reports it.
#[derive(Debug, Default, serde::Serialize)]
pub struct ShutdownSummary {
    /// Jobs running at the signal that finished within the grace.
    pub finished: Vec<String>,
    /// Jobs cancelled by the shutdown: queued ones, and running ones past the grace whose
    /// cancel took.
    pub cancelled: Vec<String>,
    /// Jobs still running when the shutdown gave up on them (a cancel that did not take
    /// within a second grace: a key still loading): they end with the process.
    pub unfinished: Vec<String>,
    pub seconds: f64,
}

/// How the gRPC server came to an end.
enum Ended {
    /// SIGTERM or SIGINT.
    Signal(ShutdownSummary),
    /// A GPU broke: the jobs to carry into the next process.
    Restart { why: String, carried: Vec<CarriedJob> },
}

/// Runs the daemon until a signal, then shuts it down; the summary of that shutdown. After a
/// GPU breaks it replaces itself (and so never returns) unless `--restart-when-broken false`.
pub fn serve(args: &ServeArgs) -> Result<ShutdownSummary> {
    // Quick restarts are counted from the process's start, which `main` fixed.
    let process_started = crate::process_started();
    let listen = parse_listen(args)?;
    let metrics_listen = args
        .metrics_listen
        .as_deref()
        .map(|text| super::http::parse_metrics_listen(text, args.allow_remote))
        .transpose()?;
    // filecoin-proofs reads its settings once: point them at the directory first.
    let params_dir = use_parameter_dir(&args.params_dir)?;
    let config = ProverConfig {
        backend: args.backend,
        devices: args.devices.clone(),
        stage_timeout: args.stage_timeout_secs.map(Duration::from_secs),
        shutdown_timeout: PROVER_STOP,
        device_memory_bytes: args.device_memory,
        ..ProverConfig::default()
    };
    let prover = Arc::new(match restart::drill_from_env() {
        Some(drill) => {
            tracing::warn!("fault drill ({}): the first kernel breaks its GPU", restart::DRILL_VARIABLE);
            Prover::with_fault_injection(config, drill)?
        }
        None => Prover::new(config)?,
    });
    let restarts = Restarts::from_env();
    let instance = format!("{:08x}", rand::random::<u32>());
    let limits = JobLimits {
        max_queued: args.max_queued,
        keep_finished: args.keep_finished,
        keep_for: Duration::from_secs(args.keep_finished_secs),
        max_queued_bytes: args.max_queued_bytes,
    };
    remove_stale_matrices_temporaries(&params_dir);
    let table = Arc::new(JobTable::new(instance.clone(), limits));
    resume_carried(&table, restarts)?;
    let srs = Arc::new(SrsTable::default());
    let shop = Arc::new(Workshop {
        table: table.clone(),
        prover: prover.clone(),
        params_dir: params_dir.clone(),
        srs: srs.clone(),
        restart: RestartPolicy { enabled: args.restart_when_broken, restarts, process_started },
    });
    let shop_policy = shop.restart;
    let workers = start_workers_with_reserve(
        shop,
        args.concurrent_jobs.unwrap_or(2 * prover.device_count().max(1)),
        args.urgent_workers.unwrap_or(prover.device_count().max(1)),
    );
    if restarts.total == 0 {
        let preloaded =
            preload_keys(&prover, &params_dir, &srs, &args.preload).and_then(|()| preload(&table, &args.preload_job));
        if let Err(err) = preloaded {
            table.close();
            return Err(err);
        }
    } else {
        // After a restart the keys and jobs were checked by the first start: the new process
        // serves at once (the carried jobs and the clients' calls wait for no preload, minutes
        // for 32 GiB keys) and loads them again behind.
        let (prover, params_dir, srs, table) = (prover.clone(), params_dir.clone(), srs.clone(), table.clone());
        let (keys, jobs) = (args.preload.clone(), args.preload_job.clone());
        let _ = std::thread::Builder::new().name("daemon-preload".into()).spawn(move || {
            if let Err(err) = preload_keys(&prover, &params_dir, &srs, &keys).and_then(|()| preload(&table, &jobs)) {
                tracing::error!(%err, "preloading again after the restart failed: the daemon serves on without it");
            }
        });
    }
    let gpu_busy = Arc::new(super::metrics::GpuBusy::default());
    let daemon = Arc::new(ProvingDaemon {
        table: table.clone(),
        prover: prover.clone(),
        srs,
        params_dir,
        max_vanilla_bytes: args.max_vanilla_bytes,
        started: Instant::now(),
        restarts: restarts.total,
        gpu_busy: gpu_busy.clone(),
    });
    // The GPUs' busy time is sampled for the metrics until the table closes (the shutdown).
    {
        let table = table.clone();
        super::metrics::sample_gpu_busy(prover.clone(), gpu_busy, move || table.is_closing())
            .map_err(|e| Error::io("starting the daemon's GPU sampler", e))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("daemon-grpc")
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the gRPC runtime", e))?;
    let grace = Duration::from_secs(args.shutdown_grace_secs);
    tracing::info!(bound_seconds = shutdown_bound(grace).as_secs(), "a SIGTERM's shutdown takes at most this long");
    // Room above the vanilla limit for the request's other fields: a blob just over the limit
    // gets this daemon's message, not the transport's.
    let max_message = args.max_vanilla_bytes.saturating_add(1 << 20);
    // Curio's door (cuzk.v1) on the same socket, jobs and prover; it takes base64 C1 envelopes.
    let cuzk = super::cuzk::CuzkDoor::server(daemon.clone(), args.max_vanilla_bytes);
    let for_http = daemon.clone();
    let service = ProvingServiceServer::new(daemon).max_decoding_message_size(max_message);
    let table_for_signal = table.clone();
    let broken_gpu = match args.restart_when_broken {
        true => watch_for_broken_gpus(prover.clone(), table.clone(), shop_policy),
        false => tokio::sync::oneshot::channel().1,
    };
    let served = runtime.block_on(async move {
        // The metrics door is bound before the gRPC listener, so the ready line can name both.
        // A door that cannot be bound stops the first start (the flag is wrong, or the port
        // taken); after a restart the daemon proves on without it, since the jobs it carries
        // matter more than their metrics.
        let bound = match metrics_listen {
            Some(addr) => match super::http::bind(addr).await {
                Ok(listener) => Some(listener),
                Err(err) if restarts.total > 0 => {
                    tracing::error!(%err, "the metrics door could not be bound again after the restart: serving without it");
                    None
                }
                Err(err) => return Err(err),
            },
            None => None,
        };
        let metrics_at = bound.as_ref().and_then(|l| l.local_addr().ok());
        let metrics_task = bound.map(|listener| tokio::spawn(super::http::serve(listener, for_http)));
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<Ended>();
        let shutdown = async move {
            let ended = tokio::select! {
                () = wait_for_signal() => Ended::Signal(drain(&table_for_signal, grace).await),
                // A watcher that ends without a restart (the table closed) drops its sender.
                Ok(why) = broken_gpu => {
                    let carried = carry_for_restart(&table_for_signal, &why, grace).await;
                    Ended::Restart { why, carried }
                }
            };
            let _ = done_tx.send(ended);
        };
        let router = tonic::transport::Server::builder().add_service(service).add_service(cuzk);
        let mut done_rx = done_rx;
        // Once the shutdown (or the restart's carry) is through, the calls still in flight get
        // CALLS_STOP, and the server is dropped with what is left: its graceful end waits for
        // every call, and no call may hold the process (every await was released already).
        let bounded = |server: std::pin::Pin<
            Box<dyn std::future::Future<Output = std::result::Result<(), tonic::transport::Error>> + Send>,
        >| async move {
            let mut server = server;
            tokio::select! {
                served = &mut server => served.map(|()| None),
                ended = &mut done_rx => {
                    if tokio::time::timeout(CALLS_STOP, &mut server).await.is_err() {
                        tracing::warn!("calls still in flight after the shutdown: dropped with the server");
                    }
                    Ok(ended.ok())
                }
            }
            .map(|ended| (ended, done_rx))
        };
        let served = match &listen {
            Listen::Unix(path) => {
                clear_stale_socket(path)?;
                let listener = tokio::net::UnixListener::bind(path)
                    .map_err(|e| Error::io(format!("binding the socket {}", path.display()), e))?;
                {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))
                        .map_err(|e| Error::io(format!("setting the mode of the socket {}", path.display()), e))?;
                }
                announce(&format!("unix:{}", path.display()), &instance, metrics_at);
                bounded(Box::pin(router.serve_with_incoming_shutdown(super::authority::incoming(listener), shutdown)))
                    .await
            }
            Listen::Tcp(addr) => {
                let listener =
                    tokio::net::TcpListener::bind(addr).await.map_err(|e| Error::io(format!("binding {addr}"), e))?;
                let bound = listener.local_addr().map_err(|e| Error::io("reading the bound address", e))?;
                announce(&bound.to_string(), &instance, metrics_at);
                bounded(Box::pin(router.serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown))).await
            }
        };
        // The metrics door closes with the gRPC server: it must not outlive the daemon's calls.
        if let Some(task) = metrics_task {
            task.abort();
        }
        let (ended, done_rx) = served.map_err(|e| Error::Config(format!("the gRPC server failed: {e}")))?;
        if let Listen::Unix(path) = &listen {
            let _ = std::fs::remove_file(path);
        }
        let ended = match ended {
            Some(ended) => Some(ended),
            None => done_rx.await.ok(),
        };
        Ok::<_, Error>(ended.unwrap_or(Ended::Signal(ShutdownSummary::default())))
    });
    // Handlers still on the blocking pool (a key's load) are not waited for.
    runtime.shutdown_background();
    let summary = match served {
        Ok(Ended::Restart { why, carried }) => {
            return restart_now(&table, &prover, workers, restarts, process_started, &why, carried)
        }
        Ok(Ended::Signal(summary)) => Ok(summary),
        Err(err) => Err(err),
    };
    // Whatever ended the server (a signal, or a listener that failed), the workers stop once
    // the queue is empty; after a signal it already is, and their jobs ended or were given up.
    table.close();
    join_within(workers, WORKERS_STOP);
    let report = prover.shutdown(Shutdown::Cancel);
    tracing::info!(?report, "the prover has stopped");
    summary
}

/// Joins the workers that return within `within`; one still in a job that did not stop (a
/// key still loading) is left to the process's exit.
fn join_within(workers: Vec<std::thread::JoinHandle<()>>, within: Duration) {
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    let count = workers.len();
    for worker in workers {
        let done_tx = done_tx.clone();
        // A watcher per worker reports its end; the watchers of stuck workers end with the process.
        let _ = std::thread::Builder::new().name("daemon-worker-join".into()).spawn(move || {
            let _ = worker.join();
            let _ = done_tx.send(());
        });
    }
    let deadline = Instant::now() + within;
    let joined = (0..count).take_while(|_| done_rx.recv_deadline(deadline).is_ok()).count();
    if joined < count {
        tracing::warn!(stuck = count - joined, "workers still in a job at the exit: left to it");
    }
}

/// Queues the jobs an earlier run of this daemon carried over its restart, if it did. The
/// preload jobs among them are left out: this run's own `--preload-job` proves them again.
fn resume_carried(table: &JobTable, restarts: Restarts) -> Result<()> {
    let Some(dir) = std::env::var_os(restart::CARRY_VARIABLE) else { return Ok(()) };
    let dir = PathBuf::from(dir);
    if !dir.exists() {
        // Read by an earlier exec of this same environment (a restart's restart).
        return Ok(());
    }
    let (carried, proofs) = restart::read_carry_with_proofs(&dir)?;
    let (count, kept) = (carried.len(), proofs.len());
    for proof in proofs.into_iter().filter(|p| !p.key.starts_with(PRELOAD_KEY_PREFIX)) {
        table.resume_proof(proof);
    }
    for job in carried.into_iter().filter(|j| !j.key.starts_with(PRELOAD_KEY_PREFIX)) {
        tracing::info!(job = %job.id, "carried over the restart: queued again");
        table.resume(job);
    }
    tracing::warn!(restarts = restarts.total, carried = count, proofs = kept, "restarted after a GPU broke");
    Ok(())
}

/// A thread that watches for a device the prover says needs a restart; sends why on the
/// channel (once) when one does and a restart is allowed. Ends without sending once the table
/// closes (a signal's shutdown).
fn watch_for_broken_gpus(
    prover: Arc<Prover>,
    table: Arc<JobTable>,
    policy: RestartPolicy,
) -> tokio::sync::oneshot::Receiver<String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("daemon-gpu-watch".into())
        .spawn(move || {
            let mut warned = false;
            while !table.is_closing() {
                let broken = prover.needs_restart();
                if !broken.is_empty() {
                    let why = broken.iter().map(|(gpu, cause)| format!("GPU {gpu}: {cause}")).collect::<Vec<_>>();
                    let why = why.join("; ");
                    if policy.allows_now() {
                        tracing::error!(%why, "a GPU broke for the rest of this process: restarting the daemon");
                        let _ = tx.send(why);
                        return;
                    }
                    if !warned {
                        tracing::error!(
                            %why,
                            quick_restarts = policy.restarts.quick_in_a_row,
                            "a GPU broke again soon after each of the last restarts: not restarting; it stays out \
                             of service (check the GPU, then restart the daemon)"
                        );
                        warned = true;
                    }
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        })
        .expect("spawning the daemon's GPU watcher");
    rx
}

/// Readies the restart: no new jobs and none handed out; the running ones get `grace` to end
/// (on the GPUs that work; those the broken GPU failed come back to the queue), then are
/// interrupted and requeued; what is queued then is carried.
async fn carry_for_restart(table: &JobTable, why: &str, grace: Duration) -> Vec<CarriedJob> {
    table.hold_for_restart(why);
    wait_until_not_running(table.running(), grace).await;
    let late = table.running();
    for job in &late {
        table.interrupt(job);
    }
    wait_until_not_running(late, grace).await;
    for job in table.running() {
        tracing::warn!(job = %job.id, "a job did not stop for the restart (its key still loading?): carried as it is");
    }
    let carried = table.take_for_restart();
    // Every job not ended is carried: its awaiters here are told to await it after the restart.
    table.release_awaiters();
    carried
}

/// Waits, `within` for all together, until none of `jobs` is running any more.
async fn wait_until_not_running(jobs: Vec<Arc<Job>>, within: Duration) {
    let waits: Vec<_> = jobs
        .iter()
        .map(|job| {
            let mut watch = job.subscribe();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(within, watch.wait_for(|v| v.state != JobState::Running)).await;
            })
        })
        .collect();
    for wait in waits {
        let _ = wait.await;
    }
}

/// Writes the carried jobs beside the temporary files, stops the prover and replaces the
/// process. Returns only if that failed, with the error (the carried jobs stay on disk).
fn restart_now(
    table: &JobTable,
    prover: &Prover,
    workers: Vec<std::thread::JoinHandle<()>>,
    restarts: Restarts,
    process_started: Instant,
    why: &str,
    carried: Vec<CarriedJob>,
) -> Result<ShutdownSummary> {
    // The server has stopped taking calls: a cancel it took since the carry is final now.
    let carried = table.still_carried(carried);
    let ids: Vec<String> = carried.iter().map(|j| j.id.clone()).collect();
    let carry = restart::write_carry_with_proofs(&std::env::temp_dir(), carried, table.finished_proofs())?;
    table.close();
    // Workers end with their jobs; one stuck in a job that did not stop (a key still loading)
    // is left to the exec, which ends every thread.
    for worker in workers {
        if worker.is_finished() {
            let _ = worker.join();
        }
    }
    let report = prover.shutdown(Shutdown::Cancel);
    let next = restarts.after_one_more(process_started.elapsed());
    tracing::warn!(%why, carried = ?ids, ?report, restart = next.total, "replacing the daemon's process");
    Err(restart::exec_again(&carry, next))
}

/// Loads each named key and makes it resident on every device, before the listener exists;
/// fails on the first that cannot be (a daemon told to keep a key hot that it cannot load
/// should say so at its start, not at its first proof).
fn preload_keys(prover: &Prover, params_dir: &Path, srs: &SrsTable, names: &[KeyName]) -> Result<()> {
    for &name in names {
        let started = Instant::now();
        let loaded = srs.key_or_load(prover, params_dir, name).and_then(|key| prover.preload(&key, None));
        loaded.map_err(|err| Error::Config(format!("--preload {name}: {err}")))?;
        tracing::info!(key = %name, seconds = started.elapsed().as_secs_f64(), "preloaded");
    }
    Ok(())
}

/// The idempotency keys of `--preload-job` jobs start with it.
const PRELOAD_KEY_PREFIX: &str = "preload:";

/// Proves each job file once, before the listener exists; fails on the first that does not
/// prove (a daemon that cannot prove its own warm-up job should not take calls).
fn preload(table: &JobTable, jobs: &[PathBuf]) -> Result<()> {
    for path in jobs {
        let request = crate::filecoin::VanillaRequest::read(path)?;
        let (kind, size) = (request.kind(), crate::filecoin::sector_size_name(request.sector_size()));
        let key = format!("{PRELOAD_KEY_PREFIX}{}", path.display());
        let submitted = table.submit(&key, [0; 32], request.kind().priority(), request).map_err(|refused| {
            Error::Config(format!("preloading {}: the job table refused it: {refused:?}", path.display()))
        })?;
        let mut watch = submitted.job.subscribe();
        // The workers are threads: a small runtime of this thread's own awaits the end.
        let waiter = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the preload's runtime", e))?;
        // A GPU that breaks under the job requeues it for the restart: serving then restarts
        // at once, and the restarted process proves its preload jobs again. The condition reads
        // the view only: the table's lock is taken before the view's by `finish`, never after.
        let view = waiter
            .block_on(watch.wait_for(|v| v.state.is_final() || v.requeued))
            .map(|v| v.clone())
            .map_err(|_| Error::Internal("a preload job lost its state channel".into()))?;
        if view.requeued && !view.state.is_final() {
            tracing::warn!(path = %path.display(), "a GPU broke during the preload job: the daemon restarts");
            return Ok(());
        }
        if view.state != JobState::Succeeded {
            return Err(Error::Config(format!("preloading {}: {kind} {size}: {}", path.display(), view.error)));
        }
        tracing::info!(path = %path.display(), %kind, seconds = view.timings.total, "preloaded");
    }
    Ok(())
}

/// The line a supervisor (or a test) waits for: the daemon takes calls from now on, and,
/// with `--metrics-listen`, serves its metrics at the address it names.
fn announce(listen: &str, instance: &str, metrics: Option<SocketAddr>) {
    use std::io::Write;
    match metrics {
        Some(metrics) => {
            println!(
                "snarkpipe serve: listening on {listen} (instance {instance}), metrics on http://{metrics}/metrics"
            )
        }
        None => println!("snarkpipe serve: listening on {listen} (instance {instance})"),
    }
    let _ = std::io::stdout().flush();
    tracing::info!(%listen, %instance, ?metrics, "serving");
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing the SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
}

/// Stops taking jobs, cancels the queued ones, gives the running ones `grace` to finish and
/// cancels them after it; returns once every job has ended (or a second `grace` has passed
/// for a job whose cancel never took).
async fn drain(table: &JobTable, grace: Duration) -> ShutdownSummary {
    let started = Instant::now();
    table.close();
    let mut summary = ShutdownSummary::default();
    let mut running = Vec::new();
    for job in table.unfinished() {
        let state =
            table.cancel_if_queued(&job, "cancelled: the daemon shut down before the job started; submit it again");
        if state == JobState::Cancelled {
            summary.cancelled.push(job.id.clone());
        } else {
            running.push(job);
        }
    }
    // Each job's wait runs beside the others', so the whole wait is one grace, not one each.
    let wait_all = |jobs: Vec<Arc<Job>>, within: Duration| async move {
        let waits: Vec<_> = jobs
            .iter()
            .map(|job| {
                let mut watch = job.subscribe();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(within, watch.wait_for(|v| v.state.is_final())).await;
                })
            })
            .collect();
        for wait in waits {
            let _ = wait.await;
        }
    };
    wait_all(running.clone(), grace).await;
    let late: Vec<Arc<Job>> = running.iter().filter(|j| !j.view().state.is_final()).cloned().collect();
    for job in &late {
        table.cancel(job, "cancelled: the daemon shut down and the job did not finish within the grace");
    }
    wait_all(late, grace).await;
    for job in running {
        match job.view().state {
            JobState::Cancelled => summary.cancelled.push(job.id.clone()),
            JobState::Succeeded | JobState::Failed => summary.finished.push(job.id.clone()),
            // A cancel that has not taken (a key still loading, which nothing stops mid-read):
            // the job still runs, and ends with the process; reported as it is.
            JobState::Queued | JobState::Running => summary.unfinished.push(job.id.clone()),
        }
    }
    // Whoever still awaits a job that did not end is told now: the server ends only once
    // every call has.
    table.release_awaiters();
    summary.seconds = started.elapsed().as_secs_f64();
    tracing::info!(
        finished = ?summary.finished,
        cancelled = ?summary.cancelled,
        unfinished = ?summary.unfinished,
        "jobs at shutdown"
    );
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    /// systemd escalates to SIGKILL after `TimeoutStopSec`: the sample unit must give the
    /// daemon longer than its own bound for the grace the unit sets, or a stop kills jobs
    /// that the shutdown would have finished or reported.
    #[test]
    fn the_sample_unit_waits_longer_than_the_shutdown_takes() {
        let unit = include_str!("../../docs/snarkpipe.service");
        let value = |name: &str| -> u64 {
            let at = unit.find(name).unwrap_or_else(|| panic!("the sample unit has no {name}"));
            let digits: String = unit[at + name.len()..]
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().unwrap()
        };
        let grace = Duration::from_secs(value("--shutdown-grace-secs"));
        let stop = Duration::from_secs(value("TimeoutStopSec="));
        assert!(
            stop > shutdown_bound(grace),
            "TimeoutStopSec {stop:?} <= the shutdown's bound {:?}",
            shutdown_bound(grace)
        );
        // The twin: the unit's old setting (90 s for a 60 s grace) was too short.
        assert!(Duration::from_secs(90) <= shutdown_bound(Duration::from_secs(60)));
    }

    #[test]
    fn stale_matrices_temporaries_go_and_a_live_writers_stay() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"half").unwrap();
            path
        };
        // No process has this PID (above any pid_max); PID 1 always runs.
        let dead = file("v28-porep.params.snarkpipe-matrices.4294967295.tmp");
        let own = file(&format!("v28-porep.params.snarkpipe-matrices.{}.tmp", std::process::id()));
        let live = file("v28-porep.params.snarkpipe-matrices.1.tmp");
        let finished = file("v28-porep.params.snarkpipe-matrices");
        let other = file("notes.4294967295.tmp");
        let mut removed = remove_stale_matrices_temporaries(dir.path());
        removed.sort();
        let mut expected = vec![dead.clone(), own.clone()];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(!dead.exists() && !own.exists());
        assert!(live.exists() && finished.exists() && other.exists(), "a file that is not stale was removed");
    }

    #[test]
    fn a_listen_path_that_is_not_a_socket_is_never_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.conf");
        std::fs::write(&path, b"the node's own file").unwrap();
        let err = clear_stale_socket(&path).err().expect("a regular file was taken for a stale socket");
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"the node's own file");
        // The twin: a stale socket (bound, then its listener gone) is cleared.
        let socket = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        clear_stale_socket(&socket).unwrap();
        assert!(!socket.exists());
    }
}
