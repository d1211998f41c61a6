//! The crawl frontier: robots.txt and the delay per domain, several instances
//! sharing one crawl (every URL fetched once), an instance that dies mid-crawl,
//! Retry-After, exclusion and the admin's levers. The web sites are real HTTP
//! servers on addresses of their own (127.0.0.x), which count every request.

mod admin;
mod instances;
mod politeness;
mod renamed;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use kartei::app::config::CrawlArgs;
use kartei::domains::binaries::model::BinaryStatus;
use kartei::domains::binaries::service::Binaries;
use kartei::kernel::roles::{Principal, Role};

use crate::binaries::jpeg;
use crate::support::{
    Engine, TestServer, origin_ip, serve_crawling, test_binary_args, test_crawl_args, test_limits,
    uid,
};

/// A web site that logs every request (path, when it arrived).
#[derive(Clone)]
struct Site {
    base: String,
    log: Arc<Mutex<Vec<(String, Instant)>>>,
    /// The most image requests that were being answered at once.
    most_at_once: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct SiteState {
    log: Arc<Mutex<Vec<(String, Instant)>>>,
    robots: Option<&'static str>,
    /// Each image answer waits this long (a slow site).
    slow: Duration,
    busy_left: Arc<Mutex<u32>>,
    at_once: Arc<AtomicUsize>,
    most_at_once: Arc<AtomicUsize>,
}

/// A distinct small JPEG per name (the binaries domain folds identical content).
fn image_for(name: &str) -> Vec<u8> {
    let h = name
        .bytes()
        .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
    jpeg(16 + h % 40, 16 + (h / 40) % 40 + (name.len() as u32 % 7))
}

/// Counts an answer as open until it is dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A distinct JPEG of about 1.3 MB (more than the crawler reads ahead):
/// a small image padded with comment segments, which decoders skip.
fn big_image(name: &str) -> Vec<u8> {
    let small = image_for(name);
    let mut out = small[..2].to_vec();
    for _ in 0..20 {
        let len: u16 = 65_000;
        out.extend_from_slice(&[0xFF, 0xFE]);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend(std::iter::repeat_n(b'k', usize::from(len) - 2));
    }
    out.extend_from_slice(&small[2..]);
    out
}

async fn site(robots: Option<&'static str>, slow: Duration) -> Site {
    let ip = origin_ip();
    let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Vec::new()));
    let most_at_once = Arc::new(AtomicUsize::new(0));
    let state = SiteState {
        log: log.clone(),
        robots,
        slow,
        busy_left: Arc::new(Mutex::new(1)),
        at_once: Arc::new(AtomicUsize::new(0)),
        most_at_once: most_at_once.clone(),
    };
    async fn note(s: &SiteState, path: String) {
        s.log.lock().unwrap().push((path, Instant::now()));
    }
    let app = axum::Router::new()
        .route(
            "/robots.txt",
            get(|State(s): State<SiteState>| async move {
                note(&s, "/robots.txt".into()).await;
                match s.robots {
                    Some(text) => text.into_response(),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }),
        )
        .route(
            "/busy.jpg",
            get(|State(s): State<SiteState>| async move {
                note(&s, "/busy.jpg".into()).await;
                let first = {
                    let mut left = s.busy_left.lock().unwrap();
                    let first = *left > 0;
                    *left = left.saturating_sub(1);
                    first
                };
                if first {
                    return (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")])
                        .into_response();
                }
                ([(header::CONTENT_TYPE, "image/jpeg")], image_for("busy")).into_response()
            }),
        )
        .route(
            "/same/{name}",
            get(
                |State(s): State<SiteState>, Path(name): Path<String>| async move {
                    note(&s, format!("/same/{name}")).await;
                    ([(header::CONTENT_TYPE, "image/jpeg")], image_for("same"))
                },
            ),
        )
        .route(
            "/big/{name}",
            get(
                |State(s): State<SiteState>, Path(name): Path<String>| async move {
                    note(&s, format!("/big/{name}")).await;
                    let now = s.at_once.fetch_add(1, Ordering::SeqCst) + 1;
                    s.most_at_once.fetch_max(now, Ordering::SeqCst);
                    // Answered until its last piece has gone (the guard
                    // goes with the stream).
                    let open = Open(s.at_once.clone());
                    let body = big_image(&name);
                    let pieces =
                        futures::stream::unfold((body, 0, open), |(body, at, open)| async move {
                            if at >= body.len() {
                                return None;
                            }
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            let end = (at + (64 << 10)).min(body.len());
                            let piece = bytes::Bytes::copy_from_slice(&body[at..end]);
                            Some((Ok::<_, std::io::Error>(piece), (body, end, open)))
                        });
                    (
                        [(header::CONTENT_TYPE, "image/jpeg")],
                        axum::body::Body::from_stream(pieces),
                    )
                },
            ),
        )
        .route(
            "/{dir}/{name}",
            get(
                |State(s): State<SiteState>, Path((dir, name)): Path<(String, String)>| async move {
                    note(&s, format!("/{dir}/{name}")).await;
                    let now = s.at_once.fetch_add(1, Ordering::SeqCst) + 1;
                    s.most_at_once.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(s.slow).await;
                    s.at_once.fetch_sub(1, Ordering::SeqCst);
                    (
                        [(header::CONTENT_TYPE, "image/jpeg")],
                        image_for(&format!("{dir}/{name}")),
                    )
                },
            ),
        )
        .with_state(state);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Site {
        base: format!("http://{ip}:{port}"),
        log,
        most_at_once,
    }
}

impl Site {
    /// Its host: the crawl domain of its links (an IP).
    fn host(&self) -> String {
        let authority = self.base.trim_start_matches("http://");
        authority.split(':').next().unwrap().to_owned()
    }

    fn requests(&self) -> Vec<(String, Instant)> {
        self.log.lock().unwrap().clone()
    }

    fn hits(&self) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for (p, _) in self.requests() {
            *out.entry(p).or_insert(0) += 1;
        }
        out
    }

    /// The shortest gap between two requests that arrived one after the other.
    fn min_gap(&self) -> Option<Duration> {
        let mut at: Vec<Instant> = self.requests().into_iter().map(|(_, t)| t).collect();
        at.sort();
        at.windows(2).map(|w| w[1] - w[0]).min()
    }
}

fn machine() -> Principal {
    Principal::local("crawl-test", &[Role::Machine])
}

async fn register(b: &Binaries, url: &str) -> String {
    b.register_url(&machine(), url, &format!("crawl-{}", uid()), None)
        .await
        .expect("register")
        .reference_id
}

/// Waits until every reference's binary is settled (not PROCESSING or RETRY);
/// returns their statuses.
async fn all_settled(b: &Binaries, refs: &[String], bound: Duration) -> Vec<BinaryStatus> {
    let started = Instant::now();
    loop {
        let mut out = Vec::new();
        for r in refs {
            let (_, o) = b.resolve(r).await.unwrap().expect("the reference");
            match o.status {
                Some(BinaryStatus::Processing | BinaryStatus::Retry) | None => break,
                Some(s) => out.push(s),
            }
        }
        if out.len() == refs.len() {
            return out;
        }
        assert!(
            started.elapsed() < bound,
            "{} of {} settled after {bound:?}",
            out.len(),
            refs.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn crawl_args(delay_ms: u64) -> CrawlArgs {
    CrawlArgs {
        crawl_delay_ms: delay_ms,
        ..test_crawl_args()
    }
}

/// A server whose crawler runs, in keyspaces of its own on Cassandra: the
/// tests count the requests a site sees, and other tests' crawlers on the
/// shared keyspaces would fetch its links too (each instance reads
/// robots.txt for itself).
async fn crawling_server(engine: Engine, args: Option<CrawlArgs>) -> TestServer {
    serve_crawling(
        crate::support::isolated_store(engine).await,
        test_limits(),
        test_binary_args(),
        args,
    )
    .await
}
