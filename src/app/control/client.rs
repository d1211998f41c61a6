//! The command's side: hands a job to the server holding the data directory
//! (over its socket) or to a server named by `--server` (over HTTP), sends
//! the input, and prints the job's lines as they come.

use axum::body::Bytes;

use super::{
    CHECK_HEADER, Holder, INPUT_HEADER, JOB_HEADER, LENGTH_HEADER, Said, USER_HEADER, encode,
};
use crate::app::jobs::{Input, Job, Refused, Stream};

/// Hands `job` to the server `holder` names and prints what it says; the
/// exit status the job ended with (130 when Ctrl-C stopped it).
pub async fn hand_over(holder: &Holder, job: &Job, input: Option<&Input>) -> anyhow::Result<u8> {
    until_ctrl_c(talk(holder, job, input)).await
}

/// The job's exit status, or 130 when Ctrl-C came first: the connection
/// drops with this process, and the server stops the job.
async fn until_ctrl_c(talk: impl Future<Output = anyhow::Result<u8>>) -> anyhow::Result<u8> {
    tokio::select! {
        r = talk => r,
        _ = tokio::signal::ctrl_c() => {
            eprintln!(
                "cancelled: the server stops the job (an import that did not finish is never made current; rows an import already wrote stay, and the same command skips them next time)"
            );
            Ok(130)
        }
    }
}

/// The job's headers: the job itself, the input's name as typed, and who
/// runs the command.
fn job_headers(job: &Job, input: Option<&Input>) -> anyhow::Result<[(&'static str, String); 3]> {
    Ok([
        (JOB_HEADER, encode(&serde_json::to_string(job)?)),
        (INPUT_HEADER, encode(input.map_or("", |i| i.shown.as_str()))),
        (USER_HEADER, encode(&crate::app::jobs::local_user())),
    ])
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
    let body = match input {
        Some(i) => upload(i).await?,
        None => http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed_unsync(),
    };
    let mut request = hyper::Request::post("/jobs").header("host", "localhost");
    for (name, value) in job_headers(job, input)? {
        request = request.header(name, value);
    }
    let request = request.body(body)?;
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
/// Whether a token may go to `url` as it is: over https, or over http to
/// this machine (a loopback address or `localhost`).
pub fn private_url(url: &str) -> bool {
    let Ok(u) = url::Url::parse(url) else {
        // Not a URL: the request fails with its own message.
        return true;
    };
    match (u.scheme(), u.host()) {
        ("https", _) => true,
        ("http", Some(url::Host::Domain(d))) => d.eq_ignore_ascii_case("localhost"),
        ("http", Some(url::Host::Ipv4(a))) => a.is_loopback(),
        ("http", Some(url::Host::Ipv6(a))) => a.is_loopback(),
        _ => false,
    }
}

pub async fn hand_over_remote(
    url: &str,
    token: Option<&str>,
    job: &Job,
    input: Option<&Input>,
) -> anyhow::Result<u8> {
    until_ctrl_c(talk_remote(url, token, job, input)).await
}

async fn talk_remote(
    url: &str,
    token: Option<&str>,
    job: &Job,
    input: Option<&Input>,
) -> anyhow::Result<u8> {
    use http_body_util::BodyExt;
    let endpoint = format!("{}/jobs", url.trim_end_matches('/'));
    let client = reqwest::Client::new();
    let request = || {
        let mut request = client.post(&endpoint);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(size) = input
            .and_then(|i| i.path.as_ref())
            .and_then(|p| std::fs::metadata(p).ok())
        {
            request = request.header(LENGTH_HEADER, size.len());
        }
        Ok::<_, anyhow::Error>(
            job_headers(job, input)?
                .into_iter()
                .fold(request, |r, (n, v)| r.header(n, v)),
        )
    };
    let unreachable =
        |e: reqwest::Error| Refused(format!("cannot reach the kartei server at {url}: {e}"));
    // First without the input: a refusal (token, role, size) arrives whole
    // instead of breaking off an upload the server will not read.
    let checked = request()?
        .header(CHECK_HEADER, "1")
        .send()
        .await
        .map_err(unreachable)?;
    if !checked.status().is_success() {
        return Err(refusal(url, checked).await.into());
    }
    let mut request = request()?;
    if let Some(i) = input {
        request = request.body(reqwest::Body::wrap_stream(
            upload(i).await?.into_data_stream(),
        ));
    }
    let mut response = request.send().await.map_err(unreachable)?;
    if !response.status().is_success() {
        return Err(refusal(url, response).await.into());
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

/// The server's refusal of a job in one sentence, with what to do.
async fn refusal(url: &str, response: reqwest::Response) -> Refused {
    let status = response.status();
    {
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
        Refused(format!("the server at {url} refused the job: {why}{hint}"))
    }
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

#[cfg(test)]
mod tests {
    use super::private_url;

    #[test]
    fn a_token_goes_over_https_or_to_this_machine() {
        for ok in [
            "https://kartei.example.org",
            "https://192.0.2.1:8443/",
            "http://127.0.0.1:8080",
            "http://127.1.2.3",
            "http://localhost:8080",
            "http://[::1]:8080",
        ] {
            assert!(private_url(ok), "{ok}");
        }
        for not in [
            "http://kartei.example.org",
            "http://192.0.2.1:8080",
            "http://[2001:db8::1]/",
        ] {
            assert!(!private_url(not), "{not}");
        }
    }
}
