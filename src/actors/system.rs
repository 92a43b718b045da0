//! The actix system the actors live on, run on its own thread so that the prover works the
//! same from plain threads and from inside an async runtime (no runtime within a runtime).

use std::thread::JoinHandle;

use crossbeam_channel::bounded;

use crate::error::{Error, Result};

/// An actix system on a dedicated thread.
pub struct ActorSystem {
    system: actix::System,
    arbiter: actix::ArbiterHandle,
    thread: Option<JoinHandle<()>>,
}

impl ActorSystem {
    /// Starts the system thread.
    pub fn start(name: &str) -> Result<ActorSystem> {
        let (ready, started) = bounded(1);
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let runner = actix::System::new();
                let _ = ready.send((actix::System::current(), actix::Arbiter::current()));
                let _ = runner.run();
            })
            .map_err(|e| Error::io("starting the actor system thread", e))?;
        let (system, arbiter) = started.recv().map_err(|_| Error::ShutDown)?;
        Ok(ActorSystem { system, arbiter, thread: Some(thread) })
    }

    /// Runs `f` on the system's thread (where actors can be started) and returns its value.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
        let (done, result) = bounded(1);
        if !self.arbiter.spawn_fn(move || {
            let _ = done.send(f());
        }) {
            return Err(Error::ShutDown);
        }
        result.recv().map_err(|_| Error::ShutDown)
    }

    /// Stops the system and waits for its thread.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.system.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ActorSystem {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}
