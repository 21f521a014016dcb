//! Capture of a guest's stdout and stderr into the block's log.
//!
//! Unlike wasmtime-wasi's memory pipe, a full capture never makes the
//! guest's write fail (Rust's `println!` would panic on that): output past
//! the cap is counted and dropped, and the block's log says so.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

#[derive(Debug, Default)]
struct Buffer {
    data: Vec<u8>,
    dropped: usize,
}

/// A capped, shareable capture buffer.
#[derive(Debug, Clone)]
pub struct CappedCapture {
    cap: usize,
    buffer: Arc<Mutex<Buffer>>,
}

impl CappedCapture {
    pub fn new(cap: usize) -> Self {
        CappedCapture {
            cap,
            buffer: Arc::default(),
        }
    }

    fn append(&self, bytes: &[u8]) {
        let mut b = self.buffer.lock().unwrap();
        let room = self.cap.saturating_sub(b.data.len());
        let take = room.min(bytes.len());
        b.data.extend_from_slice(&bytes[..take]);
        b.dropped += bytes.len() - take;
    }

    /// The captured text so far, left in place.
    pub fn peek(&self) -> String {
        String::from_utf8_lossy(&self.buffer.lock().unwrap().data).into_owned()
    }

    /// The captured text and how many bytes were dropped past the cap.
    pub fn take(&self) -> (String, usize) {
        let mut b = self.buffer.lock().unwrap();
        let data = std::mem::take(&mut b.data);
        (String::from_utf8_lossy(&data).into_owned(), b.dropped)
    }
}

impl IsTerminal for CappedCapture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedCapture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CappedCapture {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedCapture {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CappedCapture {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_past_the_cap_without_failing() {
        let mut c = CappedCapture::new(5);
        c.write(Bytes::from_static(b"hello world")).unwrap();
        assert_eq!(c.check_write().unwrap(), 64 * 1024);
        assert_eq!(c.take(), ("hello".to_string(), 6));
    }
}
