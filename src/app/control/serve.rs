//! The server's side: a job arrives (over the control socket or `POST
//! /jobs`), its input is spooled, it runs, and its lines stream back.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::{
    ALIVE_EVERY, CHECK_HEADER, INPUT_HEADER, JOB_HEADER, LENGTH_HEADER, Said, USER_HEADER, header,
};
use crate::app::jobs::{self, Console, Input, Job, Refused};
use crate::domains::jobs::model::JobState;
use crate::store::DynStore;

struct Served {
    store: DynStore,
    spool: PathBuf,
    next: std::sync::atomic::AtomicU64,
}

impl Served {
    fn new(store: DynStore, spool: PathBuf) -> Arc<Served> {
        Arc::new(Served {
            store,
            spool,
            next: std::sync::atomic::AtomicU64::new(1),
        })
    }
}

/// The control socket's routes: `POST /jobs` for the data directory's owner.
pub(super) fn socket_router(store: DynStore, spool: PathBuf) -> axum::Router {
    axum::Router::new()
        .route("/jobs", post(run_job))
        .with_state(Served::new(store, spool))
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
    let served = Served::new(store, spool);
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
    let too_large = || ApiError::Limit {
        code: "JOB_INPUT_TOO_LARGE",
        status: 413,
        message: format!(
            "a job's input may have {max_input} bytes at most (--max-job-input-bytes); split it, or run the command on the server's machine"
        ),
    };
    let length = headers
        .get(LENGTH_HEADER)
        .or_else(|| headers.get(axum::http::header::CONTENT_LENGTH))
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if job.reads_input() && length.is_some_and(|n| n > max_input) {
        return too_large().into_response();
    }
    if headers.contains_key(CHECK_HEADER) {
        return StatusCode::NO_CONTENT.into_response();
    }
    let started_by = match caller {
        Some(c) => c
            .sub
            .clone()
            .unwrap_or_else(|| "a token without a subject".into()),
        None => header(&headers, USER_HEADER).unwrap_or_else(|| "local".into()),
    };
    // Recorded as its input begins to arrive, so that a long upload is seen.
    let shown = job
        .reads_input()
        .then(|| header(&headers, INPUT_HEADER).unwrap_or_else(|| "input".into()));
    let record = match jobs::begin(&job, &s.store, shown.clone(), length, &started_by).await {
        Ok(r) => r,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let input = if let Some(shown) = shown {
        let n = s.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = s.spool.join(format!("{}-{n}.input", std::process::id()));
        let spooled = Spooled(path.clone());
        if let Err(e) = spool(&path, body, max_input, &record.bytes()).await {
            // Too large is refused; an input that stopped arriving was
            // given up by its command (Ctrl-C, or the connection broke).
            let (refusal, ended) = if e.kind() == ErrorKind::FileTooLarge {
                (too_large(), JobState::Failed)
            } else {
                (
                    ApiError::BadUserInput(format!("the input did not arrive whole: {e}")),
                    JobState::Cancelled,
                )
            };
            record.said(&refusal.message());
            if let Err(e) = record.end(ended, None).await {
                tracing::warn!(error = %e, "how a job ended was not recorded");
            }
            return refusal.into_response();
        }
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
    tracing::info!(job = job.name(), %started_by, "a batch command handed over its job");
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
        let outcome = jobs::run_recorded(job, store, input, &mut console, record).await;
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

/// Bytes of an input past the limit read and dropped, at most, so that a
/// command whose size was unknown (standard input) finishes sending and
/// reads the 413 instead of a broken connection; and for how long.
const DISCARD_BYTES: u64 = 64 << 20;
const DISCARD_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads and drops what is left of a refused input, within the bounds above.
async fn discard_the_rest(
    chunks: &mut (impl futures::Stream<Item = Result<Bytes, axum::Error>> + Unpin),
) {
    let mut dropped = 0u64;
    let _ = tokio::time::timeout(DISCARD_FOR, async {
        while let Some(Ok(chunk)) = chunks.next().await {
            dropped = dropped.saturating_add(chunk.len() as u64);
            if dropped > DISCARD_BYTES {
                break;
            }
        }
    })
    .await;
}

/// Writes the arriving input to `path` as it comes, `max` bytes at most
/// (more: `FileTooLarge`), counting them in `counted`.
async fn spool(
    path: &Path,
    body: Body,
    max: u64,
    counted: &std::sync::atomic::AtomicU64,
) -> std::io::Result<()> {
    let mut file = tokio::fs::File::create(path).await?;
    let mut chunks = body.into_data_stream();
    let mut arrived = 0u64;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(std::io::Error::other)?;
        arrived = arrived.saturating_add(chunk.len() as u64);
        if arrived > max {
            discard_the_rest(&mut chunks).await;
            return Err(ErrorKind::FileTooLarge.into());
        }
        file.write_all(&chunk).await?;
        counted.store(arrived, std::sync::atomic::Ordering::Relaxed);
    }
    file.flush().await?;
    Ok(())
}
