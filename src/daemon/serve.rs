//! `snarkpipe serve`: the daemon's process. It binds its listener (a Unix socket, or a TCP
//! address that must be loopback unless `--allow-remote`), starts the prover and the workers,
//! serves until SIGTERM or SIGINT, and then shuts down within a bound: no new jobs, queued
//! ones cancelled, running ones given `--shutdown-grace-secs` to finish and cancelled after.
//! When a GPU breaks for the rest of the process, it restarts itself instead ([`super::restart`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};

use super::jobs::{CarriedJob, Job, JobLimits, JobState, JobTable};
use super::pb::proving_service_server::ProvingServiceServer;
use super::restart::{self, RestartPolicy, Restarts};
use super::service::ProvingDaemon;
use super::worker::{start_workers, SrsTable, Workshop};
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
    /// Jobs that may wait for a worker; a submit beyond it is refused.
    #[arg(long, default_value_t = JobLimits::default().max_queued)]
    pub max_queued: usize,
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
    /// On SIGTERM, how long running jobs may take to finish before they are cancelled.
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
/// on is not taken over.
fn clear_stale_socket(path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(Error::Config(format!("another process already serves on {}", path.display())));
    }
    tracing::warn!(path = %path.display(), "removing the stale socket of an earlier run");
    std::fs::remove_file(path).map_err(|e| Error::io(format!("removing the stale socket {}", path.display()), e))
}

/// What the shutdown did, as `serve` reports it.
#[derive(Debug, Default, serde::Serialize)]
pub struct ShutdownSummary {
    /// Jobs running at the signal that finished within the grace.
    pub finished: Vec<String>,
    /// Jobs cancelled by the shutdown: queued ones, and running ones past the grace.
    pub cancelled: Vec<String>,
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
    // filecoin-proofs reads its settings once: point them at the directory first.
    let params_dir = use_parameter_dir(&args.params_dir)?;
    let config = ProverConfig {
        backend: args.backend,
        devices: args.devices.clone(),
        stage_timeout: args.stage_timeout_secs.map(Duration::from_secs),
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
    };
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
    let workers = start_workers(shop, args.concurrent_jobs.unwrap_or(2 * prover.device_count().max(1)));
    let preloaded =
        preload_keys(&prover, &params_dir, &srs, &args.preload).and_then(|()| preload(&table, &args.preload_job));
    if let Err(err) = preloaded {
        table.close();
        return Err(err);
    }
    let daemon = Arc::new(ProvingDaemon {
        table: table.clone(),
        prover: prover.clone(),
        srs,
        params_dir,
        max_vanilla_bytes: args.max_vanilla_bytes,
        started: Instant::now(),
        restarts: restarts.total,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("daemon-grpc")
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the gRPC runtime", e))?;
    let grace = Duration::from_secs(args.shutdown_grace_secs);
    // Room above the vanilla limit for the request's other fields: a blob just over the limit
    // gets this daemon's message, not the transport's.
    let max_message = args.max_vanilla_bytes.saturating_add(1 << 20);
    // Curio's door (cuzk.v1) on the same socket, jobs and prover; it takes base64 C1 envelopes.
    let cuzk = super::cuzk::CuzkDoor::server(daemon.clone(), args.max_vanilla_bytes);
    let service = ProvingServiceServer::new(daemon).max_decoding_message_size(max_message);
    let table_for_signal = table.clone();
    let broken_gpu = match args.restart_when_broken {
        true => watch_for_broken_gpus(prover.clone(), table.clone(), shop_policy),
        false => tokio::sync::oneshot::channel().1,
    };
    let served = runtime.block_on(async move {
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
        let served = match &listen {
            Listen::Unix(path) => {
                clear_stale_socket(path)?;
                let listener = tokio::net::UnixListener::bind(path)
                    .map_err(|e| Error::io(format!("binding the socket {}", path.display()), e))?;
                announce(&format!("unix:{}", path.display()), &instance);
                router.serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown).await
            }
            Listen::Tcp(addr) => {
                let listener =
                    tokio::net::TcpListener::bind(addr).await.map_err(|e| Error::io(format!("binding {addr}"), e))?;
                let bound = listener.local_addr().map_err(|e| Error::io("reading the bound address", e))?;
                announce(&bound.to_string(), &instance);
                router.serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown).await
            }
        };
        served.map_err(|e| Error::Config(format!("the gRPC server failed: {e}")))?;
        if let Listen::Unix(path) = &listen {
            let _ = std::fs::remove_file(path);
        }
        Ok::<_, Error>(done_rx.await.unwrap_or(Ended::Signal(ShutdownSummary::default())))
    });
    let summary = match served {
        Ok(Ended::Restart { why, carried }) => {
            return restart_now(&table, &prover, workers, restarts, process_started, &why, carried)
        }
        Ok(Ended::Signal(summary)) => Ok(summary),
        Err(err) => Err(err),
    };
    // Whatever ended the server (a signal, or a listener that failed), the workers stop once
    // the queue is empty; after a signal it already is.
    table.close();
    for worker in workers {
        let _ = worker.join();
    }
    let report = prover.shutdown(Shutdown::Cancel);
    tracing::info!(?report, "the prover has stopped");
    summary
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
    let carried = restart::read_carry(&dir)?;
    let count = carried.len();
    for job in carried.into_iter().filter(|j| !j.key.starts_with(PRELOAD_KEY_PREFIX)) {
        tracing::info!(job = %job.id, "carried over the restart: queued again");
        table.resume(job);
    }
    tracing::warn!(restarts = restarts.total, carried = count, "restarted after a GPU broke");
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
        tracing::error!(job = %job.id, "a job neither ended nor stopped for the restart: it is lost with this process");
    }
    table.take_for_restart()
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
    let ids: Vec<String> = carried.iter().map(|j| j.id.clone()).collect();
    let carry = restart::write_carry(&std::env::temp_dir(), carried)?;
    table.close();
    // Workers end with their jobs; one stuck in a job that ignored its interrupt is left to
    // the exec, which ends every thread.
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

/// The line a supervisor (or a test) waits for: the daemon takes calls from now on.
fn announce(listen: &str, instance: &str) {
    use std::io::Write;
    println!("snarkpipe serve: listening on {listen} (instance {instance})");
    let _ = std::io::stdout().flush();
    tracing::info!(%listen, %instance, "serving");
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
            // A cancel that never took: the prover's own shutdown gives it up next.
            JobState::Queued | JobState::Running => summary.cancelled.push(job.id.clone()),
        }
    }
    summary.seconds = started.elapsed().as_secs_f64();
    tracing::info!(finished = ?summary.finished, cancelled = ?summary.cancelled, "jobs at shutdown");
    summary
}
