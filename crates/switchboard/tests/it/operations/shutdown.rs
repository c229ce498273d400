use crate::{exited, process_env, run, sigterm, switchboard};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;
use switchboard_testing::{TestDb, eventually, random_prefix};

fn ready_status(port: u16) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test]
async fn sigterm_drains_finishes_in_flight_requests_and_exits_zero() {
    let db = TestDb::fresh().await;
    let mut vars = process_env(&db, &random_prefix());
    let port: u16 = vars["PORT"].parse().unwrap();
    vars.insert("DRAIN_DELAY_MS".into(), "1500".into());
    let org: Value =
        serde_json::from_slice(&run(&vars, &["admin", "create-org", "--name", "O"]).stdout)
            .unwrap();
    let org = org["id"].as_str().unwrap().to_owned();
    let out = run(
        &vars,
        &[
            "admin",
            "create-user",
            "--org",
            &org,
            "--email",
            "slow@example.test",
            "--password",
            "slow password",
            "--role",
            "expert",
        ],
    );
    assert!(out.status.success());

    let mut child = switchboard(&vars, &["serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Raw requests that close their connection: an idle keep-alive one would be the
    // drain's to wait for.
    let ready = |want: u16| move || async move { (ready_status(port) == Some(want)).then_some(()) };
    eventually("the pod is ready", Duration::from_secs(30), ready(200)).await;

    // A slow client: headers and half of the body now, the rest after SIGTERM.
    let body = br#"{"email":"slow@example.test","password":"slow password"}"#;
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(slow, "POST /auth/login HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).unwrap();
    slow.write_all(&body[..10]).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    sigterm(&child);
    eventually(
        "readiness turns 503 while draining",
        Duration::from_secs(1),
        ready(503),
    )
    .await;

    slow.write_all(&body[10..]).unwrap();
    let mut response = String::new();
    slow.read_to_string(&mut response).unwrap();
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "in-flight request completes: {response}"
    );
    assert!(response.contains("\"token\""));

    let status = exited(&mut child, Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0));
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "listener closed"
    );
}
