//! Just enough HTTP/1.1 for the benchmark: requests on a kept-alive connection, responses
//! framed by `Content-Length` (what both servers under test send).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One keep-alive HTTP/1.1 connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: &str) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    /// Sends one request and reads its whole response; returns the status.
    pub async fn round_trip(&mut self, request: &[u8]) -> std::io::Result<u16> {
        self.stream.write_all(request).await?;
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
                let status = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                let total = end + 4 + length;
                while self.buf.len() < total {
                    self.fill().await?;
                }
                self.buf.drain(..total);
                return Ok(status);
            }
            self.fill().await?;
        }
    }

    async fn fill(&mut self) -> std::io::Result<()> {
        if self.stream.read_buf(&mut self.buf).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }
}
