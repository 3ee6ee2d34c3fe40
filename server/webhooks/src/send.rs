//! One delivery attempt: a signed `POST` of the body to the endpoint's URL, bounded by the
//! attempt timeout, following no redirect (a `3xx` is a failed attempt, so a receiver cannot
//! send the payload elsewhere), reading none of the answer but its status.

use std::time::{Duration, Instant};

use standardwebhooks::{
    HEADER_WEBHOOK_ID, HEADER_WEBHOOK_SIGNATURE, HEADER_WEBHOOK_TIMESTAMP, Webhook, WebhookError,
};

use vidforge_core::config::Endpoint;
use vidforge_core::store::Attempt;

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the webhook HTTP client: {0}")]
pub struct ClientError(#[from] reqwest::Error);

/// The HTTP client every attempt of this node shares (its connection pool included).
#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
    node: String,
}

impl Sender {
    pub fn new(timeout: Duration, node: &str) -> Result<Sender, ClientError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("vidforge-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Sender {
            client,
            node: node.to_string(),
        })
    }

    /// Posts `body` as event `id` to `endpoint`, signed now; the attempt as it went.
    pub async fn attempt(&self, endpoint: &Endpoint, id: &str, body: Vec<u8>, at: u64) -> Attempt {
        let started = Instant::now();
        let (status, error) = match self.post(endpoint, id, body).await {
            Ok(status) => (Some(status), None),
            Err(e) => (None, Some(e.to_string())),
        };
        Attempt {
            at,
            node: self.node.clone(),
            status,
            error,
            millis: started.elapsed().as_millis() as u64,
        }
    }

    async fn post(&self, endpoint: &Endpoint, id: &str, body: Vec<u8>) -> Result<u16, SendError> {
        let webhook = Webhook::new(&endpoint.secret).map_err(SendError::Secret)?;
        // Signed at send time: the timestamp is the attempt's (receivers refuse stale ones).
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let signature = webhook
            .sign(id, timestamp, &body)
            .map_err(SendError::Sign)?;
        let response = self
            .client
            .post(&endpoint.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(HEADER_WEBHOOK_ID, id)
            .header(HEADER_WEBHOOK_TIMESTAMP, timestamp.to_string())
            .header(HEADER_WEBHOOK_SIGNATURE, signature)
            .body(body)
            .send()
            .await
            .map_err(SendError::Request)?;
        Ok(response.status().as_u16())
    }
}

/// Why an attempt got no answer (its `Display` is the attempt's recorded `error`).
#[derive(Debug, thiserror::Error)]
enum SendError {
    /// The endpoint's secret is not a Standard Webhooks secret.
    #[error("bad secret: {0}")]
    Secret(WebhookError),
    /// The body could not be signed.
    #[error("cannot sign: {0}")]
    Sign(WebhookError),
    /// The request got no answer.
    #[error("{}", describe(.0))]
    Request(reqwest::Error),
}

/// A short reason for a request that got no answer.
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timeout".into()
    } else if e.is_connect() {
        "connection failed".into()
    } else {
        let mut s = e.to_string();
        s.truncate(200);
        s
    }
}
