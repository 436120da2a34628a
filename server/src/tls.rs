//! TLS on the shared port (`--tls-cert`, `--tls-key`).
//!
//! Telnet, HTTP and TLS share one port: a TLS connection starts with a handshake record
//! (content type 22), which no telnet command and no HTTP method starts with, so the first
//! byte tells them apart. Inside TLS the same sniffing tells telnet from HTTP again.
//!
//! The certificate chain and key are PEM files. [`Tls::reload`] reads them again (on SIGHUP),
//! and new connections use the new pair while open ones keep theirs; a pair that does not load
//! leaves the old one in use.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use parking_lot::RwLock;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The first byte of a TLS handshake record.
const HANDSHAKE: u8 = 0x16;

/// True if a connection whose first byte is `first` starts a TLS handshake.
pub fn starts_tls(first: u8) -> bool {
    first == HANDSHAKE
}

/// The server's certificate and key, reloadable.
#[derive(Debug)]
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    config: RwLock<Arc<ServerConfig>>,
}

fn load_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<ServerConfig>> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading the certificate {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing the certificate {}", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!("no certificate in {}", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the private key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the certificate and the key do not make a usable pair")?;
    Ok(Arc::new(config))
}

impl Tls {
    /// Loads the PEM certificate chain `cert` and private key `key`.
    pub fn load(cert: &Path, key: &Path) -> anyhow::Result<Tls> {
        Ok(Tls {
            config: RwLock::new(load_config(cert, key)?),
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
        })
    }

    /// Reads the files again; on an error the pair in use stays.
    pub fn reload(&self) -> anyhow::Result<()> {
        let config = load_config(&self.cert, &self.key)?;
        *self.config.write() = config;
        Ok(())
    }

    /// An acceptor with the current pair.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.read().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A self-signed certificate for `localhost` written as PEM files in `dir`.
    fn self_signed(dir: &Path, name: &str) -> anyhow::Result<(PathBuf, PathBuf, Vec<u8>)> {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])?;
        let (c, k) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, cert.cert.pem())?;
        std::fs::write(&k, cert.signing_key.serialize_pem())?;
        Ok((c, k, cert.cert.der().to_vec()))
    }

    /// Handshakes with `tls` as a client that trusts only `trusted`, sends `ping` and reads
    /// what the server side echoes.
    async fn round_trip(tls: &Tls, trusted: &[u8]) -> anyhow::Result<Vec<u8>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(trusted.to_vec()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let (a, b) = tokio::io::duplex(64 * 1024);
        let acceptor = tls.acceptor();
        let server = tokio::spawn(async move {
            let mut s = acceptor.accept(b).await?;
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await?;
            s.write_all(&buf).await?;
            s.flush().await?;
            anyhow::Ok(())
        });
        let name = rustls::pki_types::ServerName::try_from("localhost")?;
        let mut c = connector.connect(name, a).await?;
        c.write_all(b"ping").await?;
        let mut got = vec![0u8; 4];
        c.read_exact(&mut got).await?;
        server.await??;
        Ok(got)
    }

    #[test]
    fn only_a_handshake_record_starts_tls() {
        assert!(starts_tls(0x16));
        for b in b"putGPDHOvsad\r\n" {
            assert!(!starts_tls(*b), "{b}");
        }
    }

    #[tokio::test]
    async fn serves_its_pair_and_a_reloaded_one() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (cert, key, first) = self_signed(dir.path(), "a")?;
        let tls = Tls::load(&cert, &key)?;
        assert_eq!(round_trip(&tls, &first).await?, b"ping");

        let (cert2, key2, second) = self_signed(dir.path(), "b")?;
        std::fs::copy(&cert2, &cert)?;
        std::fs::copy(&key2, &key)?;
        tls.reload()?;
        assert_eq!(round_trip(&tls, &second).await?, b"ping");
        assert!(
            round_trip(&tls, &first).await.is_err(),
            "the old pair is gone"
        );
        Ok(())
    }

    #[test]
    fn a_bad_pair_is_refused_and_the_old_one_stays() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (cert, key, _) = self_signed(dir.path(), "a")?;
        let (_, other_key, _) = self_signed(dir.path(), "b")?;
        assert!(Tls::load(&cert, &other_key).is_err(), "mismatched key");
        let missing = dir.path().join("missing.pem");
        let err = format!("{:#}", Tls::load(&missing, &key).err().context("loaded")?);
        assert!(err.contains("missing.pem"), "{err}");
        let tls = Tls::load(&cert, &key)?;
        std::fs::write(&cert, "not a certificate")?;
        assert!(tls.reload().is_err());
        Ok(())
    }
}
