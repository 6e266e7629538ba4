//! A TCP listener that holds at most `max_connections` connections open:
//! past that it stops accepting (new connections wait in the kernel's
//! backlog) until one closes, so a flood cannot exhaust file descriptors.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The listener.
#[derive(Debug)]
pub(crate) struct LimitedListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
}

impl LimitedListener {
    /// Wraps `inner`, allowing `max` open connections.
    pub(crate) fn new(inner: TcpListener, max: usize) -> Self {
        LimitedListener {
            inner,
            permits: Arc::new(Semaphore::new(max.max(1))),
        }
    }
}

/// An accepted connection; its slot frees when it is dropped.
#[derive(Debug)]
pub(crate) struct LimitedStream {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl axum::serve::Listener for LimitedListener {
    type Io = LimitedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // The semaphore is never closed, so this only waits.
            let Ok(permit) = self.permits.clone().acquire_owned().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    // Small SSE writes and JSON replies: do not wait for Nagle.
                    let _ = stream.set_nodelay(true);
                    return (
                        LimitedStream {
                            stream,
                            _permit: permit,
                        },
                        addr,
                    );
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl AsyncRead for LimitedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
