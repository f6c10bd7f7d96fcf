//! The sessions of `lmcp serve --http`: bounded where they are made, and closed when idle.
//!
//! rmcp's own idle clock counts only messages inside a session, so it would close sessions whose
//! client was waiting on a long call or listening on an open stream. Here a session is idle
//! only while none of its requests is being answered and none of its streams is open, and then
//! for the whole `--idle-timeout`. The bound on sessions is checked where a session is made,
//! under one lock, so handshakes that arrive together cannot pass it between the check in
//! front of the service and the making.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_core::Stream;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, SizeHint};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::server_side_http::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};

use crate::error::Error;

/// The sessions, their bound, and what each is doing.
#[derive(Debug)]
pub struct Sessions {
    local: LocalSessionManager,
    max: usize,
    /// Held while a session is made, so the count checked is the count made.
    making: tokio::sync::Mutex<()>,
    uses: Mutex<HashMap<SessionId, Use>>,
}

/// What one session is doing.
#[derive(Debug)]
struct Use {
    /// Requests being answered and streams open.
    open: usize,
    /// When the last of them ended (or the session began).
    last: Instant,
}

/// rmcp's session failure, as lmcp's error.
fn local(e: LocalSessionManagerError) -> Error {
    Error::Tool {
        tool: "serve --http".into(),
        message: e.to_string(),
    }
}

impl Sessions {
    /// At most `max` sessions; rmcp's idle clock is off (ours is [`Sessions::reap`]).
    pub fn new(max: usize) -> Sessions {
        let mut local = LocalSessionManager::default();
        local.session_config.keep_alive = None;
        Sessions {
            local,
            max,
            making: tokio::sync::Mutex::new(()),
            uses: Mutex::new(HashMap::new()),
        }
    }

    /// How many sessions are open.
    pub async fn count(&self) -> usize {
        self.local.sessions.read().await.len()
    }

    /// Whether no more sessions may be made.
    pub async fn full(&self) -> bool {
        self.count().await >= self.max
    }

    fn uses(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Use>> {
        self.uses.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A request of session `id` is being answered until the returned guard drops (with the
    /// answer's body). `None` for an id this server never made.
    pub fn enter(self: &Arc<Self>, id: &str) -> Option<InUse> {
        let mut uses = self.uses();
        let id: SessionId = id.into();
        uses.get_mut(&id)?.open += 1;
        Some(InUse {
            sessions: Arc::clone(self),
            id,
        })
    }

    /// Closes every session unused for `idle`, checking a few times per `idle`, until the
    /// task is dropped.
    pub async fn reap(self: Arc<Self>, idle: Duration) {
        let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        loop {
            tokio::time::sleep(every).await;
            let open: Vec<SessionId> = self.local.sessions.read().await.keys().cloned().collect();
            let expired: Vec<SessionId> = {
                let mut uses = self.uses();
                // sessions closed by their clients are forgotten
                uses.retain(|id, _| open.contains(id));
                uses.iter()
                    .filter(|(_, u)| u.open == 0 && u.last.elapsed() >= idle)
                    .map(|(id, _)| id.clone())
                    .collect()
            };
            for id in expired {
                self.uses().remove(&id);
                let _ = self.local.close_session(&id).await;
            }
        }
    }
}

/// A request or stream of one session, in progress until dropped.
#[derive(Debug)]
pub struct InUse {
    sessions: Arc<Sessions>,
    id: SessionId,
}

impl Drop for InUse {
    fn drop(&mut self) {
        if let Some(held) = self.sessions.uses().get_mut(&self.id) {
            held.open = held.open.saturating_sub(1);
            held.last = Instant::now();
        }
    }
}

type HttpBody = BoxBody<Bytes, Infallible>;

/// `body`, with the session in use until the body is sent or dropped.
pub fn tracked(body: HttpBody, in_use: InUse) -> HttpBody {
    BoxBody::new(Tracked {
        body,
        _in_use: in_use,
    })
}

/// An answer's body holding its session's [`InUse`].
struct Tracked {
    body: HttpBody,
    _in_use: InUse,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl SessionManager for Sessions {
    type Error = Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _making = self.making.lock().await;
        if self.full().await {
            return Err(Error::Limit {
                what: "open HTTP sessions".into(),
                limit: self.max.to_string(),
            });
        }
        let (id, transport) = self.local.create_session().await.map_err(local)?;
        self.uses().insert(
            id.clone(),
            Use {
                open: 0,
                last: Instant::now(),
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.local
            .initialize_session(id, message)
            .await
            .map_err(local)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await.map_err(local)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.uses().remove(id);
        self.local.close_session(id).await.map_err(local)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_stream(id, message).await.map_err(local)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await.map_err(local)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.create_standalone_stream(id).await.map_err(local)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.resume(id, last_event_id).await.map_err(local)
    }

    async fn restore_session(
        &self,
        _id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // sessions live in this process only: an unknown one is gone (404)
        Ok(RestoreOutcome::NotSupported)
    }
}
