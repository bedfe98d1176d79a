//! Client certificates on the write listener, for two CAs with two meanings:
//!
//! - the publish CA (`--client-ca`): a certificate from it is *required* (the handshake fails
//!   without one);
//! - the ingress client CA (`--ingress-client-ca`): a certificate from it is only *requested*;
//!   it marks the connection as coming from the ingress in front (whose forwarded client
//!   address is then believed, [`crate::realip`]). A connection without one, or with a
//!   certificate from anywhere else, is served all the same and speaks for itself.
//!
//! The handshake still checks that the client holds the key of whatever certificate it shows;
//! which CA, if any, vouches for the chain is decided per connection by [`ClientAuth::verdict`].

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::error::Error;

/// What a connection's client certificate proves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Verdict {
    /// It chains to the publish CA (`--client-ca`).
    pub publish: bool,
    /// It is a client certificate chaining to the ingress client CA (`--ingress-client-ca`).
    pub front: bool,
}

/// The write listener's client-certificate policy.
#[derive(Debug)]
pub(super) struct ClientAuth {
    publish: Option<Arc<dyn ClientCertVerifier>>,
    front: Option<Arc<dyn ClientCertVerifier>>,
    /// One of the two, for the handshake's signature checks (they do not depend on the roots).
    signatures: Arc<dyn ClientCertVerifier>,
    hints: Vec<DistinguishedName>,
}

fn verifier(
    pem: &str,
    what: &str,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let cert = cert.map_err(|e| Error::Config(format!("{what}: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| Error::Config(format!("{what}: {e}")))?;
    }
    if roots.is_empty() {
        return Err(Error::Config(format!(
            "{what}: holds no certificate this can use"
        )));
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| Error::Config(format!("{what}: {e}")))
}

impl ClientAuth {
    /// The policy for the given CAs (PEM); `None` when neither is set.
    pub(super) fn new(
        publish_ca: Option<&str>,
        ingress_client_ca: Option<&str>,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Option<Arc<Self>>, Error> {
        let publish = publish_ca
            .map(|pem| verifier(pem, "client CA", provider))
            .transpose()?;
        let front = ingress_client_ca
            .map(|pem| verifier(pem, "ingress client CA", provider))
            .transpose()?;
        let Some(signatures) = publish.clone().or_else(|| front.clone()) else {
            return Ok(None);
        };
        let hints = publish
            .iter()
            .chain(front.iter())
            .flat_map(|v| v.root_hint_subjects().iter().cloned())
            .collect();
        Ok(Some(Arc::new(Self {
            publish,
            front,
            signatures,
            hints,
        })))
    }

    /// What `chain` (end entity first, as presented) proves; nothing when empty.
    pub(super) fn verdict(&self, chain: &[CertificateDer<'_>]) -> Verdict {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Verdict::default();
        };
        let vouches = |v: &Option<Arc<dyn ClientCertVerifier>>| {
            v.as_ref().is_some_and(|v| {
                v.verify_client_cert(leaf, intermediates, UnixTime::now())
                    .is_ok()
            })
        };
        Verdict {
            publish: vouches(&self.publish),
            front: vouches(&self.front),
        }
    }
}

impl ClientCertVerifier for ClientAuth {
    fn client_auth_mandatory(&self) -> bool {
        self.publish.is_some()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if self
            .front
            .as_ref()
            .is_some_and(|v| v.verify_client_cert(end_entity, intermediates, now).is_ok())
        {
            return Ok(ClientCertVerified::assertion());
        }
        match &self.publish {
            Some(publish) => publish.verify_client_cert(end_entity, intermediates, now),
            // Only requested: served, and not believed ([`ClientAuth::verdict`]).
            None => Ok(ClientCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signatures.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.signatures.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(pem: &str) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn what_a_certificate_proves() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let publish = testkit::Certs::new("publish-client-ca");
        let ingress = testkit::Certs::new("registry-storage-ingress-client-ca");
        let stranger = testkit::Certs::new("someone-else");
        let both = ClientAuth::new(Some(&publish.ca_pem()), Some(&ingress.ca_pem()), &provider)
            .unwrap()
            .unwrap();
        let table = [
            // (chain presented, publish, front)
            (Vec::new(), false, false),
            (chain(&ingress.client("ingress").cert_pem), false, true),
            (chain(&ingress.server(&[]).cert_pem), false, false),
            (chain(&publish.client("d8-mirror").cert_pem), true, false),
            (chain(&stranger.client("ingress").cert_pem), false, false),
        ];
        for (presented, publish, front) in table {
            assert_eq!(
                both.verdict(&presented),
                Verdict { publish, front },
                "{publish} {front}"
            );
        }
        assert!(both.client_auth_mandatory());
        let requested = ClientAuth::new(None, Some(&ingress.ca_pem()), &provider)
            .unwrap()
            .unwrap();
        assert!(!requested.client_auth_mandatory());
        assert!(ClientAuth::new(None, None, &provider).unwrap().is_none());
        let error = ClientAuth::new(None, Some("not a certificate"), &provider).unwrap_err();
        assert!(error.to_string().contains("ingress client CA"), "{error}");
    }
}
