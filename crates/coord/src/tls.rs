//! The one place a redis-rs client is built, so every Redis user (queues, realtime driver,
//! limiter, breaker, dedup, subscriptions) gets the same TLS: `rediss://` verified against
//! the system roots plus `REDIS_TLS_CA`, or encrypted without verification when
//! `REDIS_TLS=require` asks for it.

use crate::CoordError;
use base64::Engine;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, TlsCertificates};
use switchboard_config::RedisTls;

/// A client for `info` with `tls` applied. Connects nothing yet.
pub fn client(info: ConnectionInfo, tls: &RedisTls) -> Result<redis::Client, CoordError> {
    match (tls, info.addr().clone()) {
        (RedisTls::Off, _) => Ok(redis::Client::open(info)?),
        (RedisTls::Require, ConnectionAddr::TcpTls { host, port, .. }) => {
            let info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure: true,
                tls_params: None,
            });
            Ok(redis::Client::open(info)?)
        }
        (RedisTls::Verify { ca: None }, ConnectionAddr::TcpTls { .. }) => {
            Ok(redis::Client::open(info)?)
        }
        (RedisTls::Verify { ca: Some(path) }, ConnectionAddr::TcpTls { .. }) => {
            Ok(redis::Client::build_with_tls(
                info,
                TlsCertificates {
                    client_tls: None,
                    root_cert: Some(ca_bundle(path)?),
                },
            )?)
        }
        (_, _) => Err(CoordError::TlsNeedsRediss),
    }
}

/// `REDIS_TLS_CA` with the system roots appended: redis-rs trusts only the bundle it is
/// given, so the system roots go with it and a CA bundle never narrows what `verify`
/// accepts (as with Postgres).
pub(crate) fn ca_bundle(path: &std::path::Path) -> Result<Vec<u8>, CoordError> {
    let mut bundle = std::fs::read(path).map_err(|source| CoordError::CaFile {
        path: path.display().to_string(),
        source,
    })?;
    bundle.extend(system_roots_pem());
    Ok(bundle)
}

/// A client for `url` with `tls` applied.
pub fn client_for_url(url: &str, tls: &RedisTls) -> Result<redis::Client, CoordError> {
    let info = url
        .into_connection_info()
        .map_err(|_| CoordError::InvalidUrl)?;
    client(info, tls)
}

/// The system's trusted roots as PEM.
fn system_roots_pem() -> Vec<u8> {
    let mut out = Vec::new();
    for cert in rustls_native_certs::load_native_certs().certs {
        let b64 = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
        out.extend_from_slice(b"\n-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
        out.extend_from_slice(b"-----END CERTIFICATE-----\n");
    }
    out
}
