//! The one HTTP client stack: reqwest on rustls, with ring as its crypto and the system's
//! trust roots. Everything lmcp sends over HTTP goes through a client made here: other MCP
//! servers reached over Streamable HTTP (through rmcp's client) and friction reports.
//!
//! Proxy variables in the environment are ignored: a proxy would see every request and hide
//! where it goes. Redirects are not followed unless the caller says how.

use std::time::Duration;

/// A client builder with lmcp's defaults: TLS as above, no proxy, no redirects, and the given
/// overall timeout per request (`None`: none, for streams that stay open).
pub fn client(timeout: Option<Duration>) -> reqwest::ClientBuilder {
    install_crypto();
    let builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(30));
    match timeout {
        Some(t) => builder.timeout(t),
        None => builder,
    }
}

/// Makes ring rustls's crypto for this process, once (reqwest's `rustls-no-provider` needs one
/// before the first client is built).
fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // fails only when another provider is already installed, which then serves as well
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_builds() {
        super::client(Some(std::time::Duration::from_secs(1)))
            .build()
            .expect("the TLS stack and the system's roots load");
    }
}
