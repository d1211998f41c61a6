//! The hand-over of batch commands to the server that holds an embedded
//! data directory. The embedded store is one file that one process opens; a
//! server serving it keeps a control socket beside it (`kartei.sock`, owner
//! only) and says who it is in `kartei.server` (its process id and address).
//! A batch command run on the same data directory finds that file, streams
//! its input over the socket, and prints what the job says as it would have
//! printed it itself; the job runs inside the server on the server's store
//! ([`super::jobs::run`], the same code). The input is spooled to a file in
//! the data directory first, so neither side holds it in memory. When the
//! command goes away (Ctrl-C, killed), the job is stopped like a killed
//! command: a dataset import that did not finish is never made current.
//! The same jobs are served on the HTTP API for `--server URL`.
//!
//! Here: who holds a data directory and its socket; the protocol (a job in
//! a header, the input as the body, NDJSON lines back). `serve` runs the
//! jobs for both transports; `client` is the command's side.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::HeaderMap;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::jobs::Stream;
use crate::store::DynStore;

mod client;
mod serve;

pub use client::{hand_over, hand_over_remote, private_url};
pub use serve::{http_routes, temp_spool};

/// The file a serving process names itself in.
pub const SERVER_FILE: &str = "kartei.server";
/// The control socket's file.
pub const SOCKET_FILE: &str = "kartei.sock";
/// Where inputs are spooled while they arrive, in the data directory.
const SPOOL_DIR: &str = "jobs";

/// The spool of a server on the embedded data directory `dir`.
pub fn spool_dir(dir: &Path) -> PathBuf {
    dir.join(SPOOL_DIR)
}
/// The header that carries the job (base64 of its JSON).
const JOB_HEADER: &str = "kartei-job";
/// The header that carries the input's name, as the operator typed it (base64).
const INPUT_HEADER: &str = "kartei-input";
/// The header that names who runs the command (`local:<user>`, base64);
/// believed on the owner-only socket, ignored over HTTP (the token says).
const USER_HEADER: &str = "kartei-user";
/// A request with this header only asks whether the job would be taken
/// (token, role, input size): 204, or the refusal; nothing runs.
const CHECK_HEADER: &str = "kartei-check";
/// The input's size in bytes, when the command knows it (a file).
const LENGTH_HEADER: &str = "kartei-input-length";
/// How often a running job's answer says it is alive (so a command that
/// went away is noticed within about this long).
const ALIVE_EVERY: Duration = Duration::from_secs(1);

/// The server holding a data directory, as its `kartei.server` says.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    /// The HTTP address it serves on.
    pub listen: String,
    pub socket: PathBuf,
    pub started: String,
}

/// The server that holds `dir`, if one runs: a file left by a process that
/// is gone, or whose socket does not answer (its process id taken by
/// another process since), is ignored.
pub fn holder(dir: &Path) -> Option<Holder> {
    let text = std::fs::read_to_string(dir.join(SERVER_FILE)).ok()?;
    let holder: Holder = serde_json::from_str(&text).ok()?;
    (crate::kernel::process_alive(holder.pid) && answers(&holder.socket)).then_some(holder)
}

#[cfg(unix)]
fn answers(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

#[cfg(not(unix))]
fn answers(_socket: &Path) -> bool {
    false
}

/// A server's control socket; dropping it removes the socket and the
/// server file.
pub struct Control {
    dir: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Control {
    /// Opens `kartei.sock` (owner only) in `dir` and names this process in
    /// `kartei.server`, serving on `listen`.
    #[cfg(unix)]
    pub async fn start(dir: &Path, listen: &str, store: DynStore) -> anyhow::Result<Control> {
        use std::os::unix::fs::PermissionsExt;
        let socket = dir.join(SOCKET_FILE);
        // A socket left by a process that is gone (its server file names no
        // live process: `serve` checked that before opening the store).
        match std::fs::remove_file(&socket) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        let listener = tokio::net::UnixListener::bind(&socket)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", socket.display()))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
        let spool = spool_dir(dir);
        // Inputs of jobs a stopped server was receiving.
        let _ = std::fs::remove_dir_all(&spool);
        std::fs::create_dir_all(&spool)?;
        std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o700))?;
        let holder = Holder {
            pid: std::process::id(),
            listen: listen.to_owned(),
            socket: socket.clone(),
            started: crate::kernel::Clock::system().rfc3339(),
        };
        let file = dir.join(SERVER_FILE);
        let temp = dir.join(format!("{SERVER_FILE}.tmp"));
        std::fs::write(&temp, serde_json::to_vec_pretty(&holder)?)?;
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&temp, &file)?;
        let router = serve::socket_router(store, spool);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::warn!(error = %e, "the control socket stopped");
            }
        });
        Ok(Control {
            dir: dir.to_owned(),
            task,
        })
    }

    #[cfg(not(unix))]
    pub async fn start(_dir: &Path, _listen: &str, _store: DynStore) -> anyhow::Result<Control> {
        anyhow::bail!("a control socket needs a Unix system")
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.task.abort();
        // Only this process's own file.
        let mine = std::fs::read_to_string(self.dir.join(SERVER_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<Holder>(&t).ok())
            .is_some_and(|h| h.pid == std::process::id());
        if mine {
            let _ = std::fs::remove_file(self.dir.join(SERVER_FILE));
            let _ = std::fs::remove_file(self.dir.join(SOCKET_FILE));
        }
    }
}

/// One line of a job's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Said {
    /// A line the command prints on stdout or stderr.
    Line { stream: Stream, text: String },
    /// The job is still running.
    Alive { seconds: u64 },
    /// The job ended with this exit status.
    Exit { code: u8 },
    /// The job could not run: `refused` for a mistake in how it was asked for.
    Failed { message: String, refused: bool },
}

/// A header's value as this protocol writes it (base64: a job's JSON and
/// a file's name may be any text).
fn encode(value: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(value)
}

/// A header written by [`encode`].
fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    let raw = headers.get(name)?.as_bytes();
    let bytes = base64::engine::general_purpose::STANDARD.decode(raw).ok()?;
    String::from_utf8(bytes).ok()
}
