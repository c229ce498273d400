//! Reading an upstream's answer with a ceiling. `Response::text()`, `json()` and `bytes()`
//! buffer whatever arrives, so one broken or hostile upstream (a provider, the drafting
//! agent, Resend) could make a pod hold gigabytes. Every answer Switchboard reads goes
//! through [`read_capped`] instead, with a cap chosen by what that upstream should send.

use reqwest::Response;

/// Why [`read_capped`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The answer said (`Content-Length`) or turned out to be larger than `cap` bytes;
    /// nothing past the cap was kept. Asking again will not make it smaller.
    #[error("the answer is larger than the {} cap", Size(*.cap))]
    TooLarge {
        /// The cap, in bytes.
        cap: usize,
    },
    /// The connection failed or timed out while the body was arriving. The URL is left out
    /// (Telegram's carries the bot token).
    #[error("reading the answer failed")]
    Read(#[source] reqwest::Error),
}

/// The body of `response`, at most `cap` bytes. Refuses at once when `Content-Length`
/// declares more, and otherwise stops reading at the first chunk past the cap, so at most
/// `cap` plus one chunk is ever held.
pub async fn read_capped(mut response: Response, cap: usize) -> Result<Vec<u8>, BodyError> {
    let declared = response.content_length();
    if declared.is_some_and(|n| n > cap as u64) {
        return Err(BodyError::TooLarge { cap });
    }
    // What the answer declares, never more than the cap: a lie costs nothing up front.
    let mut body = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| BodyError::Read(e.without_url()))?
    {
        if body.len() + chunk.len() > cap {
            return Err(BodyError::TooLarge { cap });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A byte count as people read caps: `1 MiB`, `16 MiB`, or bytes when not whole MiB.
struct Size(usize);

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MIB: usize = 1024 * 1024;
        match self.0 {
            n if n >= MIB && n % MIB == 0 => write!(f, "{} MiB", n / MIB),
            n => write!(f, "{n}-byte"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BodyError, read_capped};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    const CAP: usize = 1024 * 1024;

    /// How the raw server below answers: wiremock always sends an honest `Content-Length`,
    /// and these cases are about answers that do not.
    #[derive(Clone, Copy)]
    enum Answer {
        /// `len` bytes with an honest `Content-Length`.
        Sized(usize),
        /// `len` bytes, chunked (no `Content-Length`).
        Chunked(usize),
        /// Chunked and never ending.
        Endless,
        /// Declares `len` bytes, sends a few and keeps the connection open.
        Declares(usize),
    }

    /// A server answering one GET as `answer` says; its base URL.
    async fn serve(answer: Answer) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            // Write errors mean the client hung up, which is what a cap does.
            let _ = write_answer(&mut socket, answer).await;
        });
        format!("http://{addr}/")
    }

    async fn write_answer(socket: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
        let chunk = vec![b'x'; 64 * 1024];
        match answer {
            Answer::Sized(len) => {
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n");
                socket.write_all(head.as_bytes()).await?;
                socket.write_all(&vec![b'x'; len]).await
            }
            Answer::Declares(len) => {
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\nxxxx");
                socket.write_all(head.as_bytes()).await?;
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(())
            }
            Answer::Chunked(_) | Answer::Endless => {
                let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
                socket.write_all(head.as_bytes()).await?;
                let mut left = match answer {
                    Answer::Chunked(len) => len,
                    _ => usize::MAX,
                };
                while left > 0 {
                    let part = &chunk[..left.min(chunk.len())];
                    socket
                        .write_all(format!("{:x}\r\n", part.len()).as_bytes())
                        .await?;
                    socket.write_all(part).await?;
                    socket.write_all(b"\r\n").await?;
                    left -= part.len();
                }
                socket.write_all(b"0\r\n\r\n").await
            }
        }
    }

    /// The body as [`read_capped`] reads it, within a deadline far below the client's
    /// timeout, so a reader that waits for the whole body fails here rather than passing late.
    async fn read(answer: Answer) -> Result<Vec<u8>, BodyError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .expect("client");
        let response = client.get(serve(answer).await).send().await.expect("sent");
        tokio::time::timeout(Duration::from_secs(5), read_capped(response, CAP))
            .await
            .expect("the cap ends the read")
    }

    fn too_large(result: Result<Vec<u8>, BodyError>) -> String {
        match result {
            Err(e @ BodyError::TooLarge { cap: CAP }) => e.to_string(),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn answers_up_to_the_cap_are_read_whole() {
        assert_eq!(read(Answer::Sized(CAP)).await.expect("read").len(), CAP);
        assert_eq!(read(Answer::Chunked(CAP)).await.expect("read").len(), CAP);
        assert_eq!(read(Answer::Sized(0)).await.expect("read").len(), 0);
    }

    #[tokio::test]
    async fn a_declared_size_over_the_cap_is_refused_before_reading() {
        // Only four bytes ever arrive: a reader that waited for the body would time out.
        let reason = too_large(read(Answer::Declares(2 * CAP)).await);
        assert_eq!(reason, "the answer is larger than the 1 MiB cap");
        too_large(read(Answer::Sized(CAP + 1)).await);
    }

    #[tokio::test]
    async fn an_undeclared_body_is_cut_off_at_the_cap() {
        too_large(read(Answer::Chunked(2 * CAP)).await);
        too_large(read(Answer::Chunked(CAP + 1)).await);
        // Buffering first and measuring after would never return.
        too_large(read(Answer::Endless).await);
    }

    #[test]
    fn caps_are_named_in_mib_when_whole() {
        let at = |cap| BodyError::TooLarge { cap }.to_string();
        assert_eq!(
            at(16 * 1024 * 1024),
            "the answer is larger than the 16 MiB cap"
        );
        assert_eq!(at(1000), "the answer is larger than the 1000-byte cap");
    }
}
