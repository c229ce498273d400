//! A Socket.IO request's head, copied out of the connection's read buffer.
//!
//! hyper parses a request's URI and header values as slices of the connection's read buffer
//! (16 KiB after a handshake), and axum keeps another slice in the `OriginalUri` extension.
//! A websocket's request head lives as long as the socket (socketioxide keeps it for
//! `req_parts()`), so each idle socket kept that whole buffer alive: 16 of its 40 KiB
//! (heaptrack, 4 000 sockets). Copying the head costs a few hundred bytes a socket instead.

use axum::extract::OriginalUri;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Uri};
use axum::middleware::Next;
use axum::response::Response;

/// Middleware: gives every `/socket.io` request a head of its own before socketioxide sees
/// it; other requests pass untouched.
pub async fn own_socket_request_head(mut req: Request<axum::body::Body>, next: Next) -> Response {
    if req.uri().path().starts_with("/socket.io") {
        own_head(&mut req);
    }
    next.run(req).await
}

/// Replaces the URI, the router's `OriginalUri` and every header with copies.
fn own_head<B>(req: &mut Request<B>) {
    if let Ok(uri) = req.uri().to_string().parse::<Uri>() {
        if req.extensions().get::<OriginalUri>().is_some() {
            req.extensions_mut().insert(OriginalUri(uri.clone()));
        }
        *req.uri_mut() = uri;
    }
    let copied: HeaderMap = req
        .headers()
        .iter()
        .filter_map(|(name, value)| {
            let name = HeaderName::from_bytes(name.as_str().as_bytes()).ok()?;
            let mut owned = HeaderValue::from_bytes(value.as_bytes()).ok()?;
            owned.set_sensitive(value.is_sensitive());
            Some((name, owned))
        })
        .collect();
    *req.headers_mut() = copied;
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// Whether `part` points into `buffer`'s memory.
    fn inside(buffer: &Bytes, part: &[u8]) -> bool {
        let range = buffer.as_ptr_range();
        range.contains(&part.as_ptr())
    }

    #[test]
    fn the_copied_head_shares_nothing_with_the_read_buffer() {
        let (path, value, sensitive) = (
            "/socket.io/?EIO=4&transport=websocket",
            "header-value",
            "secret",
        );
        let buffer = Bytes::from([path, value, sensitive].concat());
        let at = |from: usize, len: usize| buffer.slice(from..from + len);
        let uri = Uri::from_maybe_shared(at(0, path.len())).expect("uri");
        let mut req = Request::builder()
            .uri(uri.clone())
            .body(())
            .expect("request");
        req.extensions_mut().insert(OriginalUri(uri));
        let name = HeaderName::from_bytes(b"x-custom").expect("name");
        let mut secret =
            HeaderValue::from_maybe_shared(at(path.len() + value.len(), sensitive.len()))
                .expect("value");
        secret.set_sensitive(true);
        req.headers_mut().append(
            name.clone(),
            HeaderValue::from_maybe_shared(at(path.len(), value.len())).expect("value"),
        );
        req.headers_mut().append(name.clone(), secret);
        assert!(
            inside(&buffer, req.uri().path().as_bytes()),
            "the set-up shares the buffer"
        );

        own_head(&mut req);

        assert_eq!(req.uri(), path);
        assert!(!inside(&buffer, req.uri().path().as_bytes()));
        let original = req.extensions().get::<OriginalUri>().expect("kept");
        assert!(!inside(&buffer, original.0.path().as_bytes()));
        let values: Vec<&HeaderValue> = req.headers().get_all(&name).iter().collect();
        assert_eq!(values, [value, sensitive], "both values, in order");
        assert!(values.iter().all(|v| !inside(&buffer, v.as_bytes())));
        assert!(
            values[1].is_sensitive(),
            "a sensitive value stays sensitive"
        );
    }
}
