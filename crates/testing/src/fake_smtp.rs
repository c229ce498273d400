//! A fake SMTP server for tests of system mail: enough of RFC 5321 for a real client
//! (lettre) to send through it in clear (`smtp://127.0.0.1:{port}?tls=off`), with `AUTH
//! PLAIN` and `AUTH LOGIN`, and a reply code of the test's choosing at `MAIL FROM`,
//! `RCPT TO` or the end of `DATA`, so both ways a server refuses (4xx later, 5xx never)
//! can be seen. It never offers STARTTLS. Each accepted message is recorded before its
//! `250` goes out, so a send that returned is already in [`FakeSmtp::messages`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Where a scripted reply replaces the normal `250`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// `MAIL FROM`.
    MailFrom,
    /// `RCPT TO`.
    RcptTo,
    /// The end of `DATA` (the message has been sent, and is not recorded).
    Data,
}

/// One message the fake accepted.
#[derive(Debug, Clone)]
pub struct ReceivedMail {
    /// The `MAIL FROM` address.
    pub from: String,
    /// The `RCPT TO` addresses.
    pub to: Vec<String>,
    /// The message as sent (headers and body), dot-unstuffed, lines joined with CRLF.
    pub data: String,
    /// The user name the session logged in with, if it did.
    pub login: Option<String>,
}

type Lines = BufReader<OwnedReadHalf>;

#[derive(Default)]
struct State {
    login: Option<(String, String)>,
    replies: HashMap<Stage, (u16, String)>,
    messages: Vec<ReceivedMail>,
}

/// A running fake; stops (with every open session) when dropped.
pub struct FakeSmtp {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    server: JoinHandle<()>,
}

impl FakeSmtp {
    /// A server on `127.0.0.1` that takes any login, or none.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let server = tokio::spawn(async move {
            let mut sessions = JoinSet::new();
            while let Ok((socket, _)) = listener.accept().await {
                sessions.spawn(session(socket, shared.clone()));
            }
        });
        Self {
            addr,
            state,
            server,
        }
    }

    /// A server that wants this login before `MAIL FROM` (`530` otherwise, `535` for a
    /// wrong one).
    pub async fn with_login(user: &str, password: &str) -> Self {
        let fake = Self::start().await;
        fake.state().login = Some((user.to_owned(), password.to_owned()));
        fake
    }

    /// `MAIL_SMTP_URL` for this server, in clear; `userinfo` is `user:password@` or empty.
    pub fn url(&self, userinfo: &str) -> String {
        format!("smtp://{userinfo}{}?tls=off", self.addr)
    }

    /// Answers `stage` with `code` and `text` from now on (`451`: try later, `550`: never).
    pub fn reply(&self, stage: Stage, code: u16, text: &str) {
        self.state().replies.insert(stage, (code, text.to_owned()));
    }

    /// The messages accepted so far, oldest first.
    pub fn messages(&self) -> Vec<ReceivedMail> {
        self.state().messages.clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }
}

impl Drop for FakeSmtp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// One SMTP session. Write errors end it: the client hung up.
async fn session(socket: TcpStream, state: Arc<Mutex<State>>) {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read);
    let mut session = Session::default();
    let mut reply = String::from("220 fake.smtp ESMTP\r\n");
    loop {
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
        let Some(line) = next_line(&mut lines).await else {
            return;
        };
        let (verb, rest) = line.split_once(' ').unwrap_or((&line, ""));
        reply = match verb.to_ascii_uppercase().as_str() {
            "EHLO" => "250-fake.smtp\r\n250-8BITMIME\r\n250 AUTH PLAIN LOGIN\r\n".into(),
            "HELO" => "250 fake.smtp\r\n".into(),
            "AUTH" => {
                let Some(reply) = session.auth(rest, &state, &mut lines, &mut write).await else {
                    return;
                };
                reply
            }
            "MAIL" => session.mail(rest, &state),
            "RCPT" => session.rcpt(rest, &state),
            "DATA" if session.to.is_empty() => "554 5.5.1 No valid recipients\r\n".into(),
            "DATA" => {
                if write
                    .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                let mut data = Vec::new();
                loop {
                    let Some(line) = next_line(&mut lines).await else {
                        return;
                    };
                    if line == "." {
                        break;
                    }
                    data.push(line.strip_prefix('.').unwrap_or(&line).to_owned());
                }
                session.data(data.join("\r\n"), &state)
            }
            "RSET" => {
                session.reset();
                "250 2.0.0 Ok\r\n".into()
            }
            "NOOP" => "250 2.0.0 Ok\r\n".into(),
            "QUIT" => {
                let _ = write.write_all(b"221 2.0.0 Bye\r\n").await;
                return;
            }
            "STARTTLS" => "454 4.7.0 TLS not available\r\n".into(),
            _ => "502 5.5.2 Command not recognized\r\n".into(),
        };
    }
}

#[derive(Default)]
struct Session {
    login: Option<String>,
    from: Option<String>,
    to: Vec<String>,
}

impl Session {
    fn reset(&mut self) {
        self.from = None;
        self.to.clear();
    }

    /// `AUTH PLAIN [initial]` or `AUTH LOGIN [user]`; `None` when the client hung up.
    async fn auth(
        &mut self,
        args: &str,
        state: &Mutex<State>,
        lines: &mut Lines,
        write: &mut OwnedWriteHalf,
    ) -> Option<String> {
        let mut args = args.split_whitespace();
        let mechanism = args.next().unwrap_or_default().to_ascii_uppercase();
        let initial = args.next().map(str::to_owned);
        let (user, password) = match mechanism.as_str() {
            "PLAIN" => {
                let blob = match initial {
                    Some(blob) => blob,
                    None => ask(write, lines, "334 \r\n").await?,
                };
                let plain = decode(&blob);
                let mut parts = plain.split('\0').skip(1);
                let user = parts.next().unwrap_or_default().to_owned();
                (user, parts.next().unwrap_or_default().to_owned())
            }
            "LOGIN" => {
                let user = match initial {
                    Some(user) => user,
                    None => ask(write, lines, "334 VXNlcm5hbWU6\r\n").await?,
                };
                let password = ask(write, lines, "334 UGFzc3dvcmQ6\r\n").await?;
                (decode(&user), decode(&password))
            }
            _ => return Some("504 5.5.4 Unrecognized authentication type\r\n".into()),
        };
        let wanted = state.lock().unwrap().login.clone();
        if wanted.is_some_and(|w| w != (user.clone(), password)) {
            return Some("535 5.7.8 Authentication credentials invalid\r\n".into());
        }
        self.login = Some(user);
        Some("235 2.7.0 Authentication successful\r\n".into())
    }

    fn mail(&mut self, args: &str, state: &Mutex<State>) -> String {
        let state = state.lock().unwrap();
        if state.login.is_some() && self.login.is_none() {
            return "530 5.7.0 Authentication required\r\n".into();
        }
        if let Some(reply) = scripted(&state, Stage::MailFrom) {
            return reply;
        }
        self.reset();
        self.from = Some(address(args));
        "250 2.1.0 Ok\r\n".into()
    }

    fn rcpt(&mut self, args: &str, state: &Mutex<State>) -> String {
        if self.from.is_none() {
            return "503 5.5.1 Need MAIL first\r\n".into();
        }
        if let Some(reply) = scripted(&state.lock().unwrap(), Stage::RcptTo) {
            return reply;
        }
        self.to.push(address(args));
        "250 2.1.5 Ok\r\n".into()
    }

    fn data(&mut self, data: String, state: &Mutex<State>) -> String {
        let mut state = state.lock().unwrap();
        let reply = scripted(&state, Stage::Data);
        let message = ReceivedMail {
            from: self.from.take().unwrap_or_default(),
            to: std::mem::take(&mut self.to),
            data,
            login: self.login.clone(),
        };
        if let Some(reply) = reply {
            return reply;
        }
        state.messages.push(message);
        format!("250 2.0.0 Ok: queued as FAKE{}\r\n", state.messages.len())
    }
}

fn scripted(state: &State, stage: Stage) -> Option<String> {
    let (code, text) = state.replies.get(&stage)?;
    Some(format!("{code} {text}\r\n"))
}

/// The address in `FROM:<a@b> SIZE=10` or `TO:<a@b>`.
fn address(args: &str) -> String {
    let start = args.find('<').map_or(0, |i| i + 1);
    let end = args[start..].find('>').map_or(args.len(), |i| start + i);
    args[start..end].to_owned()
}

fn decode(blob: &str) -> String {
    let bytes = STANDARD.decode(blob.trim()).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Sends `prompt` and reads the answer; `None` when the client hung up.
async fn ask(write: &mut OwnedWriteHalf, lines: &mut Lines, prompt: &str) -> Option<String> {
    write.write_all(prompt.as_bytes()).await.ok()?;
    next_line(lines).await
}

/// The next line without its CRLF; `None` at the end of the stream.
async fn next_line(lines: &mut Lines) -> Option<String> {
    let mut line = String::new();
    match lines.read_line(&mut line).await {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_owned()),
    }
}
