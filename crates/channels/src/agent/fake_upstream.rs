//! A raw HTTP/1.1 server for tests of how answers are read. wiremock is not a dependency of
//! this crate, and it always sends an honest `Content-Length`; the cases here are about
//! answers that are chunked, endless, or declare more than they send.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the server answers every request, with status 200.
#[derive(Debug, Clone)]
pub enum Answer {
    /// This body, with an honest `Content-Length`.
    Sized(Vec<u8>),
    /// This many bytes of `x`, chunked (no `Content-Length`).
    Chunked(usize),
    /// Chunked and never ending.
    Endless,
    /// Declares `len` bytes and sends four; then holds the connection open (`hold`) or
    /// closes it.
    Declares { len: usize, hold: bool },
}

/// A running server: its base URL and how many requests it has received.
pub struct Upstream {
    pub url: String,
    requests: Arc<AtomicUsize>,
}

impl Upstream {
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Starts a server answering `answer` to each request, one request per connection.
pub async fn serve(answer: Answer) -> Upstream {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    let requests = Arc::new(AtomicUsize::new(0));
    let count = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (answer, count) = (answer.clone(), count.clone());
            tokio::spawn(async move {
                if read_request(&mut socket).await.is_ok() {
                    count.fetch_add(1, Ordering::SeqCst);
                    // Write errors mean the client hung up, which is what a cap does.
                    let _ = write_answer(&mut socket, answer).await;
                }
            });
        }
    });
    Upstream { url, requests }
}

/// Reads one request's head and its `Content-Length` body.
async fn read_request(socket: &mut TcpStream) -> std::io::Result<()> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match socket.read(&mut buf).await? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => got.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while got.len() < end + length {
        match socket.read(&mut buf).await? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    Ok(())
}

async fn write_answer(socket: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
    const OK: &str = "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json";
    match answer {
        Answer::Sized(body) => {
            let head = format!("{OK}\r\ncontent-length: {}\r\n\r\n", body.len());
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(&body).await
        }
        Answer::Declares { len, hold } => {
            let head = format!("{OK}\r\ncontent-length: {len}\r\n\r\nxxxx");
            socket.write_all(head.as_bytes()).await?;
            if hold {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            Ok(())
        }
        Answer::Chunked(_) | Answer::Endless => {
            let head = format!("{OK}\r\ntransfer-encoding: chunked\r\n\r\n");
            socket.write_all(head.as_bytes()).await?;
            let mut left = match answer {
                Answer::Chunked(len) => len,
                _ => usize::MAX,
            };
            let chunk = vec![b'x'; 64 * 1024];
            while left > 0 {
                let part = &chunk[..left.min(chunk.len())];
                let size = format!("{:x}\r\n", part.len());
                socket.write_all(size.as_bytes()).await?;
                socket.write_all(part).await?;
                socket.write_all(b"\r\n").await?;
                left -= part.len();
            }
            socket.write_all(b"0\r\n\r\n").await
        }
    }
}
