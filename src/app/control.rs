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

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

use super::jobs::{self, Console, Input, Job, Refused, Stream};
use crate::store::DynStore;

/// The file a serving process names itself in.
pub const SERVER_FILE: &str = "kartei.server";
/// The control socket's file.
pub const SOCKET_FILE: &str = "kartei.sock";
/// Where inputs are spooled while they arrive.
const SPOOL_DIR: &str = "jobs";
/// The header that carries the job (base64 of its JSON).
const JOB_HEADER: &str = "kartei-job";
/// The header that carries the input's name, as the operator typed it (base64).
const INPUT_HEADER: &str = "kartei-input";
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
    (alive(holder.pid) && answers(&holder.socket)).then_some(holder)
}

#[cfg(unix)]
fn answers(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

#[cfg(not(unix))]
fn answers(_socket: &Path) -> bool {
    false
}

#[cfg(unix)]
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    #[allow(unsafe_code)]
    // SAFETY: signal 0 only asks whether the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn alive(_pid: u32) -> bool {
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
        let spool = dir.join(SPOOL_DIR);
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
        let state = Arc::new(Served {
            store,
            spool,
            next: std::sync::atomic::AtomicU64::new(1),
        });
        let router = axum::Router::new()
            .route("/jobs", post(run_job))
            .with_state(state);
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

struct Served {
    store: DynStore,
    spool: PathBuf,
    next: std::sync::atomic::AtomicU64,
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

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    let raw = headers.get(name)?.as_bytes();
    let bytes = base64::engine::general_purpose::STANDARD.decode(raw).ok()?;
    String::from_utf8(bytes).ok()
}

fn line(said: &Said) -> Bytes {
    let mut v = serde_json::to_vec(said).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

/// Removes a spooled input when the job is done with it, however it ends.
struct Spooled(PathBuf);

impl Drop for Spooled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Stops the job when its answer is dropped (the command went away).
struct AbortOnDrop(tokio::task::AbortHandle, Arc<Running>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if self.0.is_finished() {
            // Ended on its own (it counted itself), or panicked.
            self.1.end("failed");
        } else {
            tracing::info!("a handed-over job stopped: its command went away");
            self.1.end("cancelled");
        }
        self.0.abort();
    }
}

/// A job in `kartei_jobs_running` until it ends, counted once in
/// `kartei_jobs_ended` with its outcome.
struct Running {
    kind: &'static str,
    ended: std::sync::atomic::AtomicBool,
}

impl Running {
    fn start(kind: &'static str) -> Arc<Running> {
        crate::kernel::metrics::job_started(kind);
        Arc::new(Running {
            kind,
            ended: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn end(&self, outcome: &'static str) {
        if !self.ended.swap(true, std::sync::atomic::Ordering::SeqCst) {
            crate::kernel::metrics::job_ended(self.kind, outcome);
        }
    }
}

async fn run_job(State(s): State<Arc<Served>>, headers: HeaderMap, body: Body) -> Response {
    serve_job(&s, None, headers, body, u64::MAX).await
}

/// `POST /jobs` on the HTTP API (`--server URL` of the batch commands): the
/// same jobs for callers with the admin or machine role, inputs up to
/// `--max-job-input-bytes`.
pub fn http_routes(
    store: DynStore,
    spool: PathBuf,
    max_input: u64,
) -> axum::Router<Arc<crate::edge::AppState>> {
    let served = Arc::new(Served {
        store,
        spool,
        next: std::sync::atomic::AtomicU64::new(1),
    });
    axum::Router::new().route(
        "/jobs",
        post(
            move |crate::api::caller::Caller(caller): crate::api::caller::Caller,
                  headers: HeaderMap,
                  body: Body| async move {
                serve_job(&served, Some(&caller), headers, body, max_input).await
            },
        ),
    )
}

/// Where a server without a data directory (on Cassandra) spools inputs.
pub fn temp_spool() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kartei-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(dir)
}

/// Runs the job a request carries; `caller` (over HTTP) must hold one of
/// the job's roles (the socket's callers are the data directory's owner).
async fn serve_job(
    s: &Served,
    caller: Option<&crate::kernel::roles::Principal>,
    headers: HeaderMap,
    body: Body,
    max_input: u64,
) -> Response {
    use crate::kernel::error::ApiError;
    let Some(job) = header(&headers, JOB_HEADER).and_then(|j| serde_json::from_str::<Job>(&j).ok())
    else {
        return ApiError::BadUserInput(
            "no job, or not one this server knows (the kartei-job header)".into(),
        )
        .into_response();
    };
    if let Some(Err(e)) = caller.map(|c| c.require_any(job.roles())) {
        return e.into_response();
    }
    let input = if job.reads_input() {
        let n = s.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = s.spool.join(format!("{}-{n}.input", std::process::id()));
        let spooled = Spooled(path.clone());
        match spool(&path, body, max_input).await {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::FileTooLarge => {
                return ApiError::Limit {
                    code: "JOB_INPUT_TOO_LARGE",
                    status: 413,
                    message: format!(
                        "a job's input may have {max_input} bytes at most (--max-job-input-bytes); split it, or run the command on the server's machine"
                    ),
                }
                .into_response();
            }
            Err(e) => {
                return ApiError::BadUserInput(format!("the input did not arrive whole: {e}"))
                    .into_response();
            }
        }
        let shown = header(&headers, INPUT_HEADER).unwrap_or_else(|| "input".into());
        Some((
            Input {
                path: Some(path),
                shown,
            },
            spooled,
        ))
    } else {
        None
    };
    tracing::info!(job = job.name(), "a batch command handed over its job");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Said>();
    let said = tx.clone();
    let mut console = Console::new(move |stream, text| {
        let _ = said.send(Said::Line { stream, text });
    });
    let store = s.store.clone();
    let running = Running::start(job.name());
    let ran = running.clone();
    let task = tokio::spawn(async move {
        let (input, spooled) = match input {
            Some((i, s)) => (Some(i), Some(s)),
            None => (None, None),
        };
        let name = job.name();
        let outcome = jobs::run(job, store, input, &mut console).await;
        drop(spooled);
        ran.end(match &outcome {
            Ok(0) => "done",
            _ => "failed",
        });
        let _ = tx.send(match outcome {
            Ok(code) => {
                tracing::info!(job = name, code, "a handed-over job ended");
                Said::Exit { code }
            }
            Err(e) => Said::Failed {
                refused: e.is::<Refused>(),
                message: format!("{e:#}"),
            },
        });
    });
    let guard = AbortOnDrop(task.abort_handle(), running);
    let started = tokio::time::Instant::now();
    let said = tokio_stream_of(rx);
    let alive = futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(ALIVE_EVERY).await;
        Some((
            Said::Alive {
                seconds: started.elapsed().as_secs(),
            },
            (),
        ))
    });
    // The job's lines until it ends, with a sign of life every second; the
    // guard goes with the stream, so a dropped answer stops the job.
    // The end of the job's lines (`None`) also ends an answer whose job
    // died without its exit line.
    let said = said.map(Some).chain(futures::stream::once(async { None }));
    let lines = futures::stream::select(said, alive.map(Some))
        .scan(false, |ended, said| {
            let out = match said {
                _ if *ended => None,
                Some(s) => {
                    *ended = matches!(s, Said::Exit { .. } | Said::Failed { .. });
                    Some(line(&s))
                }
                None => None,
            };
            futures::future::ready(out)
        })
        .map(move |b| {
            let _ = &guard;
            Ok::<_, std::io::Error>(b)
        });
    Response::builder()
        .header("content-type", "application/x-ndjson")
        .body(Body::from_stream(lines))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Writes the arriving input to `path` as it comes, `max` bytes at most
/// (more: `FileTooLarge`).
async fn spool(path: &Path, body: Body, max: u64) -> std::io::Result<()> {
    let mut file = tokio::fs::File::create(path).await?;
    let mut chunks = body.into_data_stream();
    let mut arrived = 0u64;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(std::io::Error::other)?;
        arrived = arrived.saturating_add(chunk.len() as u64);
        if arrived > max {
            return Err(ErrorKind::FileTooLarge.into());
        }
        file.write_all(&chunk).await?;
    }
    file.flush().await?;
    Ok(())
}

/// Hands `job` to the server `holder` names and prints what it says; the
/// exit status the job ended with (130 when Ctrl-C stopped it).
pub async fn hand_over(holder: &Holder, job: &Job, input: Option<&Input>) -> anyhow::Result<u8> {
    let run = talk(holder, job, input);
    tokio::select! {
        r = run => r,
        _ = tokio::signal::ctrl_c() => {
            eprintln!(
                "cancelled: the server stops the job (an import that did not finish is never made current; rows an import already wrote stay, and the same command skips them next time)"
            );
            Ok(130)
        }
    }
}

#[cfg(unix)]
async fn talk(holder: &Holder, job: &Job, input: Option<&Input>) -> anyhow::Result<u8> {
    use http_body_util::BodyExt;
    use hyper_util::rt::TokioIo;

    let stream = tokio::net::UnixStream::connect(&holder.socket)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "the server (pid {}) holds the data directory but its control socket {} does not answer: {e}",
                holder.pid,
                holder.socket.display()
            )
        })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| anyhow::anyhow!("the control socket: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let body = match input {
        Some(i) => upload(i).await?,
        None => http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed_unsync(),
    };
    let request = hyper::Request::post("/jobs")
        .header("host", "localhost")
        .header(JOB_HEADER, b64(&serde_json::to_string(job)?))
        .header(INPUT_HEADER, b64(input.map_or("", |i| i.shown.as_str())))
        .body(body)?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| anyhow::anyhow!("the server did not take the job: {e}"))?;
    let status = response.status();
    let mut body = response.into_body();
    if !status.is_success() {
        let text = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Err(Refused(String::from_utf8_lossy(&text).into_owned()).into());
    }
    let mut answer = Answer::default();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| anyhow::anyhow!("the server's answer broke off: {e}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if let Some(code) = answer.take(&data)? {
            return Ok(code);
        }
    }
    anyhow::bail!(
        "the server (pid {}) ended the job without an answer: it may have stopped; see its log",
        holder.pid
    )
}

/// A job's answer as it arrives: prints its lines, and ends with its exit
/// status or its failure.
#[derive(Default)]
struct Answer {
    pending: Vec<u8>,
}

impl Answer {
    /// Takes the next piece; `Some` once the job has ended.
    fn take(&mut self, data: &[u8]) -> anyhow::Result<Option<u8>> {
        self.pending.extend_from_slice(data);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let said: Said = serde_json::from_slice(&self.pending[..end])?;
            self.pending.drain(..=end);
            match said {
                Said::Line { stream, text } => match stream {
                    Stream::Out => println!("{text}"),
                    Stream::Err => eprintln!("{text}"),
                },
                Said::Alive { .. } => {}
                Said::Exit { code } => return Ok(Some(code)),
                Said::Failed { message, refused } => {
                    return Err(if refused {
                        Refused(message).into()
                    } else {
                        anyhow::anyhow!(message)
                    });
                }
            }
        }
        Ok(None)
    }
}

/// Hands `job` to the kartei server at `url` over its HTTP API (`POST
/// /jobs`, a token with the admin or machine role) and prints what it says;
/// the exit status the job ended with (130 when Ctrl-C stopped it).
pub async fn hand_over_remote(
    url: &str,
    token: Option<&str>,
    job: &Job,
    input: Option<&Input>,
) -> anyhow::Result<u8> {
    let run = talk_remote(url, token, job, input);
    tokio::select! {
        r = run => r,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("cancelled: the server stops the job (an import that did not finish is never made current)");
            Ok(130)
        }
    }
}

async fn talk_remote(
    url: &str,
    token: Option<&str>,
    job: &Job,
    input: Option<&Input>,
) -> anyhow::Result<u8> {
    use http_body_util::BodyExt;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let endpoint = format!("{}/jobs", url.trim_end_matches('/'));
    let mut request = reqwest::Client::new()
        .post(&endpoint)
        .header(JOB_HEADER, b64(&serde_json::to_string(job)?))
        .header(INPUT_HEADER, b64(input.map_or("", |i| i.shown.as_str())));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(i) = input {
        request = request.body(reqwest::Body::wrap_stream(
            upload(i).await?.into_data_stream(),
        ));
    }
    let mut response = request
        .send()
        .await
        .map_err(|e| Refused(format!("cannot reach the kartei server at {url}: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        let why = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| {
                let e = &v["error"];
                Some(format!(
                    "{} ({})",
                    e["message"].as_str()?,
                    e["code"].as_str()?
                ))
            })
            .unwrap_or(text);
        let hint = match status.as_u16() {
            401 => {
                "; give a token with KARTEI_TOKEN (`kartei token --role admin` where the server's secret is)"
            }
            403 => "; the token needs the admin or machine role",
            _ => "",
        };
        return Err(Refused(format!("the server at {url} refused the job: {why}{hint}")).into());
    }
    let mut answer = Answer::default();
    while let Some(data) = response
        .chunk()
        .await
        .map_err(|e| anyhow::anyhow!("the server's answer broke off: {e}"))?
    {
        if let Some(code) = answer.take(&data)? {
            return Ok(code);
        }
    }
    anyhow::bail!(
        "the server at {url} ended the job without an answer: it may have stopped; see its log"
    )
}

#[cfg(not(unix))]
async fn talk(_holder: &Holder, _job: &Job, _input: Option<&Input>) -> anyhow::Result<u8> {
    anyhow::bail!("handing a job over needs a Unix system")
}

type Upload = http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>;

/// The input as a body streamed in pieces of 256 KiB, with a progress bar
/// of the bytes handed over (on a terminal only).
async fn upload(input: &Input) -> anyhow::Result<Upload> {
    use http_body_util::BodyExt;
    use tokio::io::AsyncReadExt;

    let (reader, size): (Box<dyn tokio::io::AsyncRead + Send + Unpin>, usize) = match &input.path {
        Some(p) => {
            let file = tokio::fs::File::open(p)
                .await
                .map_err(|e| Refused(format!("cannot read {}: {e}", input.shown)))?;
            let size = file.metadata().await.map(|m| m.len() as usize).unwrap_or(0);
            (Box::new(file), size)
        }
        None => (Box::new(tokio::io::stdin()), 0),
    };
    let progress = crate::kernel::progress::Progress::start(size);
    let chunks = futures::stream::unfold(
        (reader, Some(progress)),
        |(mut reader, mut progress)| async move {
            let mut buf = vec![0u8; 256 * 1024];
            match reader.read(&mut buf).await {
                Ok(0) => {
                    if let Some(p) = progress.take() {
                        p.finish();
                    }
                    None
                }
                Ok(n) => {
                    buf.truncate(n);
                    if let Some(p) = &progress {
                        p.advance(n);
                    }
                    Some((
                        Ok(hyper::body::Frame::data(Bytes::from(buf))),
                        (reader, progress),
                    ))
                }
                Err(e) => Some((Err(e), (reader, progress))),
            }
        },
    );
    Ok(BodyExt::boxed_unsync(http_body_util::StreamBody::new(
        chunks,
    )))
}
