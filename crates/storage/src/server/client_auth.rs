//! Client certificates on the write listener, for two CAs with two meanings:
//!
//! - the publish CA (`--client-ca`): a certificate from it is *required* (the handshake fails
//!   without one);
//! - the ingress client CA (`--ingress-client-ca`): a certificate from it is only *requested*;
//!   it marks the connection as coming from the ingress in front (whose forwarded client
//!   address is then believed, [`crate::realip`]). A connection without one, or with a
//!   certificate from anywhere else, is served all the same and speaks for itself. Its file is
//!   followed ([`CaFile`]): the registry controller issues and renews that CA into the mounted
//!   Secret, so a CA that appears or changes is in force from the next connection on, without a
//!   restart; until the file holds one, nothing is believed.
//!
//! The handshake still checks that the client holds the key of whatever certificate it shows;
//! which CA, if any, vouches for the chain is decided per connection by [`ClientAuth::verdict`].

use std::sync::{Arc, Mutex};

use http_serve::ca::CaFile;
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

/// The ingress client CA's verifier, rebuilt when its file changes.
#[derive(Debug)]
struct Front {
    file: Arc<CaFile>,
    provider: Arc<CryptoProvider>,
    /// The PEM last seen, and the verifier in force (`None`: no usable CA yet).
    built: Mutex<(String, Option<Arc<dyn ClientCertVerifier>>)>,
}

impl Front {
    fn new(file: Arc<CaFile>, provider: &Arc<CryptoProvider>) -> Self {
        let front = Self {
            file,
            provider: provider.clone(),
            built: Mutex::new((String::new(), None)),
        };
        if front.verifier().is_none() {
            tracing::warn!(
                path = %front.file.path().display(),
                "no ingress client CA yet: forwarded client addresses are not believed until it appears"
            );
        }
        front
    }

    /// The verifier of the CA the file holds now. A CA that cannot be used (damaged) keeps the
    /// previous one in force.
    fn verifier(&self) -> Option<Arc<dyn ClientCertVerifier>> {
        let pem = self.file.current();
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if built.0 != pem {
            match verifier(&pem, "ingress client CA", &self.provider) {
                Ok(next) => {
                    tracing::info!(path = %self.file.path().display(), "ingress client CA in force");
                    built.1 = Some(next);
                }
                Err(error) => tracing::warn!(
                    path = %self.file.path().display(), %error,
                    "the ingress client CA cannot be used; keeping the previous one"
                ),
            }
            built.0 = pem;
        }
        built.1.clone()
    }
}

/// The write listener's client-certificate policy.
#[derive(Debug)]
pub(super) struct ClientAuth {
    publish: Option<Arc<dyn ClientCertVerifier>>,
    front: Option<Front>,
    /// For the handshake's signature checks (they do not depend on the roots).
    provider: Arc<CryptoProvider>,
    /// The publish CA's subjects (a requested certificate names no CA: the ingress's may
    /// change while running, and its client sends the one it has).
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
    /// The policy for the publish CA (PEM) and the ingress client CA's file; `None` when
    /// neither is set.
    pub(super) fn new(
        publish_ca: Option<&str>,
        ingress_client_ca: Option<Arc<CaFile>>,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Option<Arc<Self>>, Error> {
        let publish = publish_ca
            .map(|pem| verifier(pem, "client CA", provider))
            .transpose()?;
        let front = ingress_client_ca.map(|file| Front::new(file, provider));
        if publish.is_none() && front.is_none() {
            return Ok(None);
        }
        let hints = publish
            .iter()
            .flat_map(|v| v.root_hint_subjects().iter().cloned())
            .collect();
        Ok(Some(Arc::new(Self {
            publish,
            front,
            provider: provider.clone(),
            hints,
        })))
    }

    fn front(&self) -> Option<Arc<dyn ClientCertVerifier>> {
        self.front.as_ref().and_then(Front::verifier)
    }

    /// What `chain` (end entity first, as presented) proves; nothing when empty.
    pub(super) fn verdict(&self, chain: &[CertificateDer<'_>]) -> Verdict {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Verdict::default();
        };
        let vouches = |v: Option<&Arc<dyn ClientCertVerifier>>| {
            v.is_some_and(|v| {
                v.verify_client_cert(leaf, intermediates, UnixTime::now())
                    .is_ok()
            })
        };
        Verdict {
            publish: vouches(self.publish.as_ref()),
            front: vouches(self.front().as_ref()),
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
            .front()
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
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
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
        let dir = tempfile::tempdir().unwrap();
        let ingress_file = dir.path().join("ingress-client-ca.crt");
        std::fs::write(&ingress_file, ingress.ca_pem()).unwrap();
        let both = ClientAuth::new(
            Some(&publish.ca_pem()),
            Some(CaFile::watch(&ingress_file)),
            &provider,
        )
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
        let requested = ClientAuth::new(None, Some(CaFile::watch(&ingress_file)), &provider)
            .unwrap()
            .unwrap();
        assert!(!requested.client_auth_mandatory());
        assert!(ClientAuth::new(None, None, &provider).unwrap().is_none());
        let error = ClientAuth::new(Some("not a certificate"), None, &provider).unwrap_err();
        assert!(error.to_string().contains("client CA"), "{error}");
    }

    #[test]
    fn the_ingress_client_ca_is_followed_from_its_file() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let first = testkit::Certs::new("registry-storage-ingress-client-ca");
        let second = testkit::Certs::new("registry-storage-ingress-client-ca");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ingress-client-ca.crt");
        let auth = ClientAuth::new(None, Some(CaFile::watch(&file)), &provider)
            .unwrap()
            .unwrap();
        let from_first = chain(&first.client("ingress").cert_pem);
        let from_second = chain(&second.client("ingress").cert_pem);
        let front = |presented: &[CertificateDer<'_>]| auth.verdict(presented).front;
        // No CA yet: nothing is believed.
        assert!(!front(&from_first));
        std::fs::write(&file, first.ca_pem()).unwrap();
        assert!(front(&from_first));
        assert!(!front(&from_second));
        // Renewed: the new CA's certificate is believed, the old one's no longer.
        std::fs::write(&file, format!("{}\n", second.ca_pem())).unwrap();
        assert!(front(&from_second));
        assert!(!front(&from_first));
        // Damaged: the last CA stays in force.
        std::fs::write(
            &file,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert!(front(&from_second));
    }
}
