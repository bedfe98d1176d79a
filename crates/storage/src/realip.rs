//! Whose word about the client's address is taken on the write listener.
//!
//! Behind Ingress `registry-push` every connection comes from the ingress controller, and the
//! client's own address travels in `X-Forwarded-For` (or `X-Real-IP`). A header is exactly as
//! trustworthy as whoever may set it, and the write listener is reachable from outside the
//! cluster; so the header is believed only on a connection whose client certificate chains to
//! the CA issued to the ingress (`/pki/ingress-client-ca.crt`, `--ingress-client-ca`) and is a
//! client certificate. Otherwise — no certificate, one from another CA, a server certificate of
//! the same CA, no CA configured — the socket's peer address stands. Nothing is refused for
//! it: the claim is simply not believed (Deckhouse's wrapper, package `realip`).

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;

/// The address a request is logged and judged by: the forwarded one when `front_verified` (the
/// connection presented the ingress's client certificate) and the headers name a valid address,
/// otherwise `peer`'s. `X-Forwarded-For`'s first entry (the original client; the proxies append
/// after it) wins over `X-Real-IP`.
pub fn client_address(peer: SocketAddr, headers: &HeaderMap, front_verified: bool) -> IpAddr {
    if !front_verified {
        return peer.ip();
    }
    forwarded(headers).unwrap_or_else(|| peer.ip())
}

/// The address the headers claim, if they claim a parsable one.
fn forwarded(headers: &HeaderMap) -> Option<IpAddr> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    match header("x-forwarded-for") {
        Some(list) => address(list.split(',').next().unwrap_or_default()),
        None => header("x-real-ip").and_then(address),
    }
}

/// One address as proxies write it: `203.0.113.7`, `2001:db8::1`, `[2001:db8::1]:443` or
/// `203.0.113.7:443`.
fn address(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (headers, front verified, address used)
    type Row = (&'static [(&'static str, &'static str)], bool, &'static str);

    #[test]
    fn the_header_is_believed_only_behind_the_front() {
        let peer: SocketAddr = "10.0.0.5:41234".parse().unwrap();
        let table: [Row; 14] = [
            (&[], false, "10.0.0.5"),
            (&[], true, "10.0.0.5"),
            (&[("x-forwarded-for", "203.0.113.7")], false, "10.0.0.5"),
            (&[("x-forwarded-for", "203.0.113.7")], true, "203.0.113.7"),
            (&[("x-real-ip", "203.0.113.8")], false, "10.0.0.5"),
            (&[("x-real-ip", "203.0.113.8")], true, "203.0.113.8"),
            (
                &[
                    ("x-forwarded-for", "203.0.113.7, 10.1.0.1"),
                    ("x-real-ip", "203.0.113.8"),
                ],
                true,
                "203.0.113.7",
            ),
            (&[("x-forwarded-for", "2001:db8::7")], true, "2001:db8::7"),
            (
                &[("x-forwarded-for", "[2001:db8::7]:443")],
                true,
                "2001:db8::7",
            ),
            (
                &[("x-forwarded-for", "203.0.113.7:5555")],
                true,
                "203.0.113.7",
            ),
            (&[("x-forwarded-for", "unknown")], true, "10.0.0.5"),
            (&[("x-forwarded-for", " ")], true, "10.0.0.5"),
            (
                &[("x-forwarded-for", ""), ("x-real-ip", "203.0.113.8")],
                true,
                "203.0.113.8",
            ),
            (&[("x-real-ip", "not-an-address")], true, "10.0.0.5"),
        ];
        for (headers, verified, want) in table {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.append(*name, value.parse().unwrap());
            }
            assert_eq!(
                client_address(peer, &map, verified),
                want.parse::<IpAddr>().unwrap(),
                "{headers:?} verified={verified}"
            );
        }
    }
}
