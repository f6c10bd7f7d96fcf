//! The one HTTP client stack: reqwest on rustls, with ring as its crypto and the system's
//! trust roots. Everything lmcp sends over HTTP goes through a client made here: other MCP
//! servers reached over Streamable HTTP (through rmcp's client) and friction reports.
//!
//! Proxy variables in the environment are ignored: a proxy would see every request and hide
//! where it goes. Redirects are not followed unless the caller says how.
//!
//! `http_request` goes further ([`checked_client`]): its client resolves names through
//! [`Checked`], which refuses the addresses no request reaches by default ([`blocked`]:
//! loopback, private networks, link-local and metadata addresses, multicast, reserved), so the
//! address checked is the address connected to, and a name that resolves to a public address
//! when asked and to 127.0.0.1 a moment later (DNS rebinding) still cannot reach loopback.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
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

/// A client for `http_request`: [`client`]'s, with names resolved through [`Checked`]
/// (`private`: the request's host was granted private addresses by name), and the test root
/// ([`TEST_ROOT_VAR`]) trusted too in a debug build.
pub fn checked_client(timeout: Duration, private: bool) -> reqwest::Result<reqwest::Client> {
    let mut builder = client(Some(timeout)).dns_resolver(std::sync::Arc::new(Checked { private }));
    if cfg!(debug_assertions)
        && let Some(path) = std::env::var_os(TEST_ROOT_VAR)
        && let Ok(pem) = std::fs::read(path)
    {
        builder = builder.tls_certs_merge(reqwest::Certificate::from_pem_bundle(&pem)?);
    }
    builder.build()
}

/// A URL a request may be made to, and the host and port it reaches: http or https, with a
/// host, and no user name or password in it (credentials go in a header, where a secret is
/// masked). The message says what is wrong, without the URL.
pub fn target(url: &str) -> std::result::Result<(reqwest::Url, crate::config::HostPort), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("the URL is not valid ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "the URL's scheme is `{}`; a request goes to http:// or https://",
            crate::text::escape_controls(parsed.scheme())
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "the URL holds a user name or password; send credentials in a header instead".into(),
        );
    }
    // lowercase and in its `xn--` form (the URL parser makes it so for http and https), an
    // IPv6 address in brackets
    let host = match parsed.host_str() {
        Some(h) if !h.is_empty() => rule_host(h),
        _ => return Err("the URL has no host".into()),
    };
    let port = parsed.port_or_known_default().unwrap_or(80);
    let to = crate::config::HostPort {
        host,
        port,
        default_port: parsed.port().is_none(),
    };
    Ok((parsed, to))
}

/// The host as the `hosts` rules and `---@connect` lines judge it: lowercase, without the
/// trailing dot of a fully qualified name (`ads.example.org.` is `ads.example.org`), and an
/// IPv4 address written as IPv6 (mapped `[::ffff:a.b.c.d]`, compatible `[::a.b.c.d]`, NAT64
/// `[64:ff9b::a.b.c.d]`) as the IPv4 address it carries, so no spelling slips past a rule that
/// names the host.
fn rule_host(h: &str) -> String {
    let h = h.to_ascii_lowercase();
    let h = match h.strip_suffix('.') {
        Some(name) if !name.is_empty() && !name.ends_with('.') => name.to_string(),
        _ => h,
    };
    if let Some(IpAddr::V6(v6)) = literal_ip(&h)
        && let Some(v4) = carried_v4(v6)
    {
        return v4.to_string();
    }
    h
}

/// The IPv4 address an IPv6 one carries: mapped, compatible (not `::` or `::1`), NAT64.
fn carried_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let carries = match s {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0x64, 0xff9b, 0, 0, 0, 0, ..] => true,
        [0, 0, 0, 0, 0, 0, ..] => !ip.is_unspecified() && !ip.is_loopback(),
        _ => false,
    };
    carries.then(|| Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8))
}

/// The address a host names itself, when it is an IP literal (`127.0.0.1`, `[::1]`): such a
/// URL is never resolved, so it is checked against [`blocked`] before the request.
pub fn literal_ip(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// A PEM file of certificates `http_request` trusts besides the system's: read only by a
/// debug build (the tests' HTTPS server has a certificate of its own), never by a release.
pub const TEST_ROOT_VAR: &str = "LMCP_TEST_ROOT_CERT";

/// The range a blocked address is in ("127.0.0.0/8 (loopback)"), or `None` for an address a
/// request may reach. IPv4 addresses written as IPv6 (mapped `::ffff:a.b.c.d`, compatible
/// `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) are judged as the IPv4 address they carry.
pub fn blocked(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

/// The IPv4 ranges no request reaches by default.
const BLOCKED_V4: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "0.0.0.0/8 (this network)"),
    ([10, 0, 0, 0], 8, "10.0.0.0/8 (private)"),
    ([100, 64, 0, 0], 10, "100.64.0.0/10 (shared address space)"),
    ([127, 0, 0, 0], 8, "127.0.0.0/8 (loopback)"),
    (
        [169, 254, 0, 0],
        16,
        "169.254.0.0/16 (link-local, cloud metadata)",
    ),
    ([172, 16, 0, 0], 12, "172.16.0.0/12 (private)"),
    ([192, 0, 0, 0], 24, "192.0.0.0/24 (protocol assignments)"),
    ([192, 0, 2, 0], 24, "192.0.2.0/24 (documentation)"),
    ([198, 51, 100, 0], 24, "198.51.100.0/24 (documentation)"),
    ([203, 0, 113, 0], 24, "203.0.113.0/24 (documentation)"),
    ([192, 168, 0, 0], 16, "192.168.0.0/16 (private)"),
    ([198, 18, 0, 0], 15, "198.18.0.0/15 (benchmarking)"),
    ([224, 0, 0, 0], 4, "224.0.0.0/4 (multicast)"),
    ([240, 0, 0, 0], 4, "240.0.0.0/4 (reserved, broadcast)"),
];

fn blocked_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let n = u32::from(ip);
    BLOCKED_V4.iter().find_map(|(net, bits, name)| {
        let mask = u32::MAX << (32 - u32::from(*bits));
        (n & mask == u32::from(Ipv4Addr::from(*net))).then_some(*name)
    })
}

fn blocked_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some(":: (unspecified)");
    }
    if ip.is_loopback() {
        return Some("::1 (loopback)");
    }
    // IPv4 carried in IPv6: mapped, compatible, NAT64
    if let Some(v4) = carried_v4(ip) {
        return blocked_v4(v4);
    }
    match s[0] {
        x if x & 0xfe00 == 0xfc00 => Some("fc00::/7 (unique local, cloud metadata)"),
        x if x & 0xffc0 == 0xfe80 => Some("fe80::/10 (link-local)"),
        x if x & 0xffc0 == 0xfec0 => Some("fec0::/10 (site-local)"),
        x if x & 0xff00 == 0xff00 => Some("ff00::/8 (multicast)"),
        0x2001 if s[1] == 0x0db8 => Some("2001:db8::/32 (documentation)"),
        _ => None,
    }
}

/// Why a request was refused at connect time: the name resolved only to blocked addresses.
#[derive(Debug)]
pub struct BlockedAddress {
    /// The name asked for.
    pub host: String,
    /// One address it resolved to, and its range.
    pub addr: IpAddr,
    /// The range (see [`blocked`]).
    pub range: &'static str,
}

impl std::fmt::Display for BlockedAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` resolves to {}, in {}, which no request reaches unless that exact host is \
             allowed with `lmcp hosts allow {} --private`",
            self.host, self.addr, self.range, self.host
        )
    }
}

impl std::error::Error for BlockedAddress {}

/// The resolver of [`checked_client`]: the system's, with blocked addresses taken out (all of
/// them kept when the host was granted private addresses); a name left with none fails with
/// [`BlockedAddress`].
pub struct Checked {
    private: bool,
}

impl reqwest::dns::Resolve for Checked {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let private = self.private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let first_blocked = found
                .iter()
                .find_map(|a| blocked(a.ip()).map(|r| (a.ip(), r)));
            let kept: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| private || blocked(a.ip()).is_none())
                .collect();
            match (kept.is_empty(), first_blocked) {
                (true, Some((addr, range))) => Err(Box::new(BlockedAddress { host, addr, range })
                    as Box<dyn std::error::Error + Send + Sync>),
                _ => Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

/// Makes ring rustls's crypto for this process, once (reqwest's `rustls-no-provider` needs one
/// before the first client is built). Public for the code that builds a reqwest client
/// outside this module, rmcp's HTTP client in the tests among it.
pub fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // fails only when another provider is already installed, which then serves as well
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One address from every range, in each of its spellings, and public ones beside them.
    #[test]
    fn every_blocked_range_and_its_ipv6_spellings() {
        for a in [
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.168.1.1",
            "198.18.0.1",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert!(blocked(a.parse().unwrap()).is_some(), "{a}");
        }
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(blocked(a.parse().unwrap()), None, "{a}");
        }
    }

    #[test]
    fn a_client_builds() {
        super::client(Some(std::time::Duration::from_secs(1)))
            .build()
            .expect("the TLS stack and the system's roots load");
    }
}
