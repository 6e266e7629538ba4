//! Test harness: a real `moto_server` on a free loopback port, and a tiny
//! fault-injecting HTTP proxy in front of it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A running `moto_server`, killed (by its own pid) on drop.
pub(crate) struct Moto {
    child: Child,
    pub addr: SocketAddr,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(program: &str, pre: &[&str]) -> std::io::Result<Child> {
    // Port 0: moto binds a port the kernel picks and prints it. Choosing a
    // free port up front and handing it over raced with the proxies the
    // other tests bind meanwhile (CI once talked to another test's proxy,
    // which went away mid-test).
    Command::new(program)
        .args(pre)
        .args(["-H", "127.0.0.1", "-p", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
}

fn moto_importable() -> bool {
    Command::new("python3")
        .args(["-c", "import moto.server, flask, werkzeug"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The port in werkzeug's startup line, ` * Running on http://127.0.0.1:PORT`.
fn announced_port(line: &str) -> Option<u16> {
    let rest = line.split("Running on http://127.0.0.1:").nth(1)?;
    rest.trim().trim_end_matches('/').parse().ok()
}

/// Reads moto's stderr until it names its port, then keeps draining it
/// (moto logs every request there; a full pipe would stall it).
fn await_port(child: &mut Child) -> Option<u16> {
    let stderr = child.stderr.take()?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(port) = announced_port(&line)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(port);
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60)).ok()
}

/// Starts moto. Finds `moto_server` on PATH or `python3 -m moto.server`;
/// if neither is there, installs `moto[server]` with pip. Returns `None`
/// (after a loud message) only when pip itself cannot run and we are not
/// in CI; in CI a missing moto is a failure.
pub(crate) fn start_moto() -> Option<Moto> {
    let mut child = spawn("moto_server", &[]).ok();
    if child.is_none() {
        if !moto_importable() {
            eprintln!("moto_server not found: running pip install 'moto[server]'");
            let pip = Command::new("python3")
                .args(["-m", "pip", "install", "--quiet", "moto[server]"])
                .status();
            match pip {
                Ok(s) if s.success() => {}
                Ok(s) => panic!("pip install 'moto[server]' failed ({s}); the S3 tests need it"),
                Err(e) => {
                    if std::env::var_os("CI").is_some() {
                        panic!("S3 tests need moto_server and pip cannot run here: {e}");
                    }
                    eprintln!(
                        "\n\n*** SKIPPING S3 TESTS: moto_server is not installed and pip cannot run ({e}) ***\n\n"
                    );
                    return None;
                }
            }
        }
        child = spawn("moto_server", &[])
            .or_else(|_| spawn("python3", &["-m", "moto.server"]))
            .ok();
    }
    let mut child =
        child.unwrap_or_else(|| panic!("could not start moto_server nor python3 -m moto.server"));
    let Some(port) = await_port(&mut child) else {
        let status = child.try_wait().ok().flatten();
        let _ = child.kill();
        panic!("moto_server did not announce its port within 60 s (exit status: {status:?})");
    };
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let moto = Moto { child, addr };
    let deadline = Instant::now() + Duration::from_secs(10);
    while StdStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if Instant::now() > deadline {
            panic!("moto_server announced {addr} but does not accept connections");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(moto)
}

/// What the proxy saw and does.
#[derive(Default)]
pub(crate) struct ProxyState {
    /// Answer every request with a 500 instead of forwarding it.
    pub fail: AtomicBool,
    /// Requests answered with a 500.
    pub failed: AtomicUsize,
    /// Request heads (request line and headers, lower-cased names) forwarded or failed.
    pub heads: Mutex<Vec<String>>,
}

/// A loopback HTTP/1.1 proxy to `upstream` that can inject 500s. Understands
/// just enough HTTP for the SDK's requests (bodies with Content-Length).
pub(crate) async fn start_proxy(upstream: SocketAddr) -> (SocketAddr, Arc<ProxyState>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("proxy bind: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("proxy addr: {e}"));
    let state = Arc::new(ProxyState::default());
    let st = state.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(serve(client, upstream, st.clone()));
        }
    });
    (addr, state)
}

async fn read_request(
    r: &mut (impl AsyncReadExt + Unpin),
    buf: &mut Vec<u8>,
) -> Option<(String, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
            let lower = head.to_ascii_lowercase();
            assert!(
                !lower.contains("transfer-encoding: chunked"),
                "test proxy does not handle chunked request bodies"
            );
            let len: usize = lower
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let mut chunk = [0u8; 16384];
                let n = r.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let whole: Vec<u8> = buf.drain(..end + 4 + len).collect();
            return Some((head, whole));
        }
        let mut chunk = [0u8; 16384];
        let n = r.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn serve(client: TcpStream, upstream: SocketAddr, st: Arc<ProxyState>) {
    let (mut cr, cw) = client.into_split();
    let cw = Arc::new(tokio::sync::Mutex::new(cw));
    let mut up_w: Option<tokio::net::tcp::OwnedWriteHalf> = None;
    let mut buf = Vec::new();
    while let Some((head, whole)) = read_request(&mut cr, &mut buf).await {
        if let Ok(mut h) = st.heads.lock() {
            h.push(head.to_ascii_lowercase());
        }
        if st.fail.load(Ordering::SeqCst) {
            st.failed.fetch_add(1, Ordering::SeqCst);
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InternalError</Code><Message>injected by the test proxy</Message></Error>";
            let resp = format!(
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let mut w = cw.lock().await;
            let _ = w.write_all(resp.as_bytes()).await;
            let _ = w.shutdown().await;
            return;
        }
        if up_w.is_none() {
            let Ok(up) = TcpStream::connect(upstream).await else {
                return;
            };
            let (mut ur, uw) = up.into_split();
            up_w = Some(uw);
            let cw = cw.clone();
            tokio::spawn(async move {
                let mut chunk = vec![0u8; 65536];
                loop {
                    match ur.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if cw.lock().await.write_all(&chunk[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = cw.lock().await.shutdown().await;
            });
        }
        if let Some(w) = up_w.as_mut()
            && w.write_all(&whole).await.is_err()
        {
            return;
        }
    }
}
