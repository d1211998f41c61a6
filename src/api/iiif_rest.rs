//! The IIIF Image API 3.0 routes (level 2): info.json and images computed from an original or served from a stored derivative, public and readable from any origin.

use crate::api::binaries_rest::{RestError, servable};
use crate::api::rest::etag_matches;
use crate::domains::binaries::model::DERIVATIVES;
use crate::domains::binaries::service::Binaries;
use crate::kernel::error::ApiError;
use axum::extract::{ConnectInfo, FromRef, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The IIIF Image API routes: public images, readable from any origin (CORS
/// `*`, preflight answered), as image viewers on other sites expect.
pub fn public_routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Binaries: FromRef<S>,
{
    Router::new()
        .route("/iiif/3/{reference}", get(iiif_base))
        .route("/iiif/3/{reference}/info.json", get(iiif_info))
        .route(
            "/iiif/3/{reference}/{region}/{size}/{rotation}/{quality}",
            get(iiif_image),
        )
        .layer(public_cors())
}

/// CORS for public IIIF documents and images: any origin, no credentials.
pub(crate) fn public_cors() -> tower_http::cors::CorsLayer {
    tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::Any)
        .allow_methods([axum::http::Method::GET, axum::http::Method::HEAD])
        .allow_headers([header::ACCEPT, header::IF_NONE_MATCH, header::RANGE])
        .expose_headers([header::ETAG, header::LINK])
}

pub(crate) const IIIF_CONTEXT: &str = "http://iiif.io/api/image/3/context.json";

/// `GET /iiif/3/{ref}`: 303 to its info.json. The reference arrives
/// percent-decoded and is encoded again for the header: a raw `%0A` in it
/// made the header value invalid, which axum answered with a 500.
pub async fn iiif_base(Path(reference): Path<String>) -> Response {
    if let Err(e) = crate::kernel::check_id("binary", &reference) {
        return e.into_response();
    }
    let mut location = url::Url::parse("http://localhost/iiif/3").expect("a constant URL");
    location
        .path_segments_mut()
        .expect("an http URL has a path")
        .push(&reference)
        .push("info.json");
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, location.path().to_owned())],
    )
        .into_response()
}

/// The base of the URLs an answer names: `--public-url`, or else the
/// request's `Host` (development). An answer that names the Host must say
/// so in `Vary`, or a cache that keys on the path alone could hand one
/// client's Host to another; [`vary_on_host`] adds it.
pub(crate) fn base_url(binaries: &Binaries, headers: &HeaderMap) -> String {
    base_url_of(binaries.config().public_url.as_deref(), headers)
}

/// [`base_url`] for a given `--public-url`.
pub(crate) fn base_url_of(public_url: Option<&str>, headers: &HeaderMap) -> String {
    match public_url {
        Some(u) => u.to_owned(),
        None => {
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .filter(|h| {
                    h.chars()
                        .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
                })
                .unwrap_or("localhost");
            format!("http://{host}")
        }
    }
}

/// Adds `Vary: Host` to an answer whose URLs come from the Host header.
pub(crate) fn vary_on_host(binaries: &Binaries, response: Response) -> Response {
    vary_on_host_of(binaries.config().public_url.as_deref(), response)
}

/// [`vary_on_host`] for a given `--public-url`.
pub(crate) fn vary_on_host_of(public_url: Option<&str>, mut response: Response) -> Response {
    if public_url.is_none() {
        response
            .headers_mut()
            .append(header::VARY, HeaderValue::from_static("host"));
    }
    response
}

/// `GET /iiif/3/{ref}/info.json`: the image's description (JSON-LD when asked for).
pub async fn iiif_info(
    State(binaries): State<Binaries>,
    Path(reference): Path<String>,
    headers: HeaderMap,
) -> Response {
    let o = match servable(&binaries, &reference).await {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    let (w, h) = (o.width.unwrap_or(0), o.height.unwrap_or(0));
    let mut sizes: Vec<serde_json::Value> = DERIVATIVES
        .iter()
        .rev()
        .map(|(bw, bh, _)| {
            let (sw, sh) = crate::domains::binaries::imaging::fit(w as u32, h as u32, *bw, *bh);
            serde_json::json!({"width": sw, "height": sh})
        })
        .collect();
    sizes.dedup();
    let mut info = serde_json::json!({
        "@context": IIIF_CONTEXT,
        "id": format!("{}/iiif/3/{reference}", base_url(&binaries, &headers)),
        "type": "ImageService3",
        "protocol": "http://iiif.io/api/image",
        "profile": "level2",
        "width": w,
        "height": h,
        "maxWidth": crate::domains::binaries::iiif::MAX_SIDE,
        "maxHeight": crate::domains::binaries::iiif::MAX_SIDE,
        "maxArea": crate::domains::binaries::iiif::MAX_AREA,
        "sizes": sizes,
        "extraQualities": ["color", "gray", "bitonal"],
        "extraFormats": ["webp"],
        "extraFeatures": [
            "mirroring", "rotationArbitrary", "sizeUpscaling", "regionSquare",
            "sizeByConfinedWh", "sizeByWh", "sizeByPct", "sizeByW", "sizeByH",
            "regionByPx", "regionByPct", "rotationBy90s", "baseUriRedirect",
            "cors", "jsonldMediaType", "canonicalLinkHeader"
        ],
    });
    {
        use crate::domains::binaries::service::tiles;
        let (w, h) = (w as u32, h as u32);
        if tiles::has_pyramid(w, h) {
            info["tiles"] = serde_json::json!([{
                "width": tiles::TILE,
                "height": tiles::TILE,
                "scaleFactors": tiles::scale_factors(w, h),
            }]);
        }
    }
    let wants_ld = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/ld+json"));
    let content_type = if wants_ld {
        format!("application/ld+json;profile=\"{IIIF_CONTEXT}\"")
    } else {
        "application/json".to_owned()
    };
    let response = (
        [
            (header::CONTENT_TYPE, content_type),
            (
                header::LINK,
                format!("<{IIIF_CONTEXT}>; rel=\"http://www.w3.org/ns/json-ld#context\""),
            ),
        ],
        info.to_string(),
    )
        .into_response();
    vary_on_host(&binaries, response)
}

/// `GET /iiif/3/{ref}/{region}/{size}/{rotation}/{quality}.{format}`.
/// A render counts against the share of the connection's peer address
/// (requests without one, sent to the router directly, share one).
pub async fn iiif_image(
    State(binaries): State<Binaries>,
    Path((reference, region, size, rotation, qf)): Path<(String, String, String, String, String)>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
) -> Response {
    use crate::domains::binaries::service::IiifFailure;
    let req = match crate::domains::binaries::iiif::parse(&region, &size, &rotation, &qf) {
        Ok(r) => r,
        Err(e) => return iiif_error(e),
    };
    let o = match servable(&binaries, &reference).await {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    let key = format!("{region}/{size}/{rotation}/{qf}");
    // Cached and tagged by the parsed request, not its spelling: `pct:50`,
    // `pct:50.0` and `pct:050` are one image, rendered once.
    let parsed = format!("{req:?}");
    let etag = format!(
        "\"{}-{}\"",
        o.checksum.clone().unwrap_or_default(),
        crate::store::fnv1a_hex(&parsed)
    );
    if etag_matches(&headers, &etag) {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
    }
    let client = peer.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| {
        crate::domains::binaries::render_budget::client_of(p.0.0)
    });
    match binaries.iiif_image(&o, &req, &parsed, client).await {
        Ok(bytes) => vary_on_host(
            &binaries,
            (
                [
                    (header::CONTENT_TYPE, req.format.mime().to_owned()),
                    (header::ETAG, etag),
                    (header::CACHE_CONTROL, "public, max-age=86400".to_owned()),
                    (
                        header::LINK,
                        format!(
                            "<{}/iiif/3/{reference}/{key}>; rel=\"canonical\"",
                            base_url(&binaries, &headers)
                        ),
                    ),
                ],
                bytes.as_ref().clone(),
            )
                .into_response(),
        ),
        Err(IiifFailure::Request(e)) => iiif_error(e),
        Err(IiifFailure::Api(e)) => RestError::from(e).into_response(),
        Err(IiifFailure::Busy(e)) => RestError {
            error: e,
            retry_after: true,
        }
        .into_response(),
    }
}

pub(crate) fn iiif_error(e: crate::domains::binaries::iiif::IiifError) -> Response {
    use crate::domains::binaries::iiif::IiifError;
    let (status, error) = match e {
        IiifError::BadRequest(m) => (StatusCode::BAD_REQUEST, ApiError::bad_input(m)),
        IiifError::NotImplemented(m) => (StatusCode::NOT_IMPLEMENTED, ApiError::bad_input(m)),
    };
    let mut r = RestError::from(error).into_response();
    *r.status_mut() = status;
    r
}
