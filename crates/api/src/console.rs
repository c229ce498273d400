//! The expert console: the browser app built from `console/` (Vite, TypeScript), embedded in
//! the binary so a pod serves it on its own port with nothing else to deploy. The built
//! files in `console/dist/` are committed and checked against their sources
//! (`console/check.sh`), so building the binary never needs Node.
//!
//! The router's fallback: `GET /` (and `/index.html`) answers the app's page, `/assets/*`
//! and the other built files answer themselves; every other path keeps the API's JSON 404,
//! so a typo in an API path never comes back as HTML. The console routes by URL fragment
//! (`/#/queue/…`), so it needs no paths of its own.
//!
//! Every answer carries a strict Content-Security-Policy: scripts, styles, images and
//! connections (REST and the Socket.IO websocket) from this origin only, no inline script or
//! style, no framing. Vite emits content-hashed asset names, so assets are cached for a
//! year; the page itself is revalidated every time (ETag), so a deploy takes effect at the
//! next load.

use crate::error::ApiError;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "../../console/dist"]
struct Assets;

/// No inline script or style, nothing from another origin, no framing. `connect-src 'self'`
/// covers the same-origin websocket too (CSP Level 3).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
    font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

/// Content-hashed names under `assets/` never change content.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// The page names the current assets: always revalidated.
const REVALIDATE: &str = "no-cache";
/// Other files (the icon) keep their name across builds.
const SHORT: &str = "public, max-age=3600";

/// The router's fallback: a console file for `GET`/`HEAD`, else the API's JSON 404.
pub async fn fallback(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return ApiError::not_found("route").into_response();
    }
    let (name, cache) = match uri.path() {
        "/" | "/index.html" => ("index.html", REVALIDATE),
        path => match path.strip_prefix('/') {
            Some(name) if name.starts_with("assets/") => (name, IMMUTABLE),
            Some(name) if !name.contains('/') && name != "index.html" => (name, SHORT),
            _ => return ApiError::not_found("route").into_response(),
        },
    };
    let Some(file) = Assets::get(name) else {
        return ApiError::not_found("route").into_response();
    };
    let etag = format!("\"{}\"", hex::encode(&file.metadata.sha256_hash()[..16]));
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag));
    let (status, body) = if fresh {
        (StatusCode::NOT_MODIFIED, Body::empty())
    } else if method == Method::HEAD {
        (StatusCode::OK, Body::empty())
    } else {
        (StatusCode::OK, Body::from(file.data))
    };
    let mime = match file.metadata.mimetype() {
        m if m.starts_with("text/") || m == "application/javascript" => {
            format!("{m}; charset=utf-8")
        }
        m => m.to_owned(),
    };
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&mime) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(path: &str, headers: &[(&str, &str)]) -> Response {
        let mut request = axum::http::Request::get(path);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        Router::new()
            .fallback(fallback)
            .oneshot(request.body(Body::empty()).expect("request"))
            .await
            .expect("response")
    }

    async fn text(response: Response) -> String {
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    #[tokio::test]
    async fn the_page_is_served_with_a_strict_policy_and_revalidated() {
        let response = get("/", &[]).await;
        assert_eq!(response.status(), StatusCode::OK);
        let h = response.headers().clone();
        assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().expect("csp");
        assert!(csp.contains("script-src 'self';") && !csp.contains("unsafe"));
        let page = text(response).await;
        assert!(page.contains("<div id=\"app\">"));
        // No inline script: every script names a file of ours.
        for tag in page.split("<script").skip(1) {
            assert!(
                tag.contains("src=\"/assets/"),
                "inline script in index.html"
            );
        }
        let again = get(
            "/",
            &[("if-none-match", h[header::ETAG].to_str().expect("etag"))],
        )
        .await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    }

    #[tokio::test]
    async fn every_asset_the_page_names_is_embedded_and_immutable() {
        let page = text(get("/", &[]).await).await;
        let mut names = page.split("\"/assets/").skip(1).peekable();
        assert!(names.peek().is_some(), "the page names no assets");
        for rest in names {
            let name = &rest[..rest.find('"').expect("quoted")];
            let response = get(&format!("/assets/{name}"), &[]).await;
            assert_eq!(response.status(), StatusCode::OK, "{name}");
            assert_eq!(
                response.headers()[header::CACHE_CONTROL],
                "public, max-age=31536000, immutable"
            );
        }
    }

    #[tokio::test]
    async fn unknown_paths_keep_the_json_404() {
        for path in [
            "/expert-queue/nope/x",
            "/assets/missing.js",
            "/nope",
            "/a/b",
        ] {
            let response = get(path, &[]).await;
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
            assert!(
                text(response).await.contains("\"code\":\"not_found\""),
                "{path}"
            );
        }
    }
}
