//! TLS choices shared by the platform's servers.

use tokio_rustls::rustls::{self, CipherSuite};

/// *ring* (the project's only provider) with the AES-128-GCM suites first, the rest in *ring*'s
/// order. Servers that pick by their own preference (`ignore_client_order`) then settle on
/// AES-128-GCM with clients that list AES-256-GCM first (OpenSSL's curl, rustls, skopeo): 10 AES
/// rounds per block instead of 14, on both ends of every byte served. It is what Go's TLS stack
/// (containerd, docker-registry) picks on CPUs with AES instructions.
pub fn crypto_provider() -> rustls::crypto::CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    // A stable sort: the rest keep *ring*'s order.
    provider
        .cipher_suites
        .sort_by_key(|suite| !is_aes_128_gcm(suite.suite()));
    provider
}

fn is_aes_128_gcm(suite: CipherSuite) -> bool {
    matches!(
        suite,
        CipherSuite::TLS13_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ring_suite_is_kept_with_aes_128_gcm_first() {
        let ours: Vec<_> = crypto_provider()
            .cipher_suites
            .iter()
            .map(|s| s.suite())
            .collect();
        let ring: Vec<_> = rustls::crypto::ring::default_provider()
            .cipher_suites
            .iter()
            .map(|s| s.suite())
            .collect();
        assert_eq!(
            ring[0],
            CipherSuite::TLS13_AES_256_GCM_SHA384,
            "the premise"
        );
        assert_eq!(ours.len(), ring.len());
        assert!(ring.iter().all(|s| ours.contains(s)));
        assert_eq!(ours[0], CipherSuite::TLS13_AES_128_GCM_SHA256);
        let others: Vec<_> = ring.iter().filter(|s| !is_aes_128_gcm(**s)).collect();
        let after: Vec<_> = ours.iter().filter(|s| !is_aes_128_gcm(**s)).collect();
        assert_eq!(others, after, "the rest keep ring's order");
    }
}
