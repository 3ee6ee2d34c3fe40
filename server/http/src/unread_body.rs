//! Connections that cannot carry another request say so.
//!
//! A handler may answer before reading its request's body to the end: an upload over the size
//! limit is refused from its `Content-Length`, an unauthenticated one at the door, an MCP
//! message over its cap part-way. hyper then closes the connection once the answer is sent,
//! but without telling the client, which keeps the connection for its next request; that
//! request races the close and fails (`IncompleteMessage` in hyper's client, "connection
//! reset" elsewhere) through no fault of its own. [`close_if_body_unread`] watches the body
//! and marks such answers `Connection: close`, so clients open a fresh connection instead.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// Middleware: runs the request and adds `Connection: close` to the answer when the request
/// body was not read to its end.
pub async fn close_if_body_unread(request: Request, next: Next) -> Response {
    if http_body::Body::is_end_stream(request.body()) {
        return next.run(request).await;
    }
    let finished = Arc::new(AtomicBool::new(false));
    let request = request.map(|inner| {
        Body::new(Watched {
            inner,
            finished: finished.clone(),
        })
    });
    let mut response = next.run(request).await;
    if !finished.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A body that notes when it has been read to the end.
struct Watched {
    inner: Body,
    finished: Arc<AtomicBool>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            _ => false,
        };
        if ended {
            self.finished.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
