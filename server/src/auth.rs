//! Token authentication and roles (`--auth-file`).
//!
//! The file is TOML with one `[[tokens]]` table per client:
//!
//! ```toml
//! [[tokens]]
//! name = "grafana"
//! token = "a-long-random-secret"
//! roles = ["read"]
//! ```
//!
//! A role is `read`, `write` or `admin`. HTTP clients send `Authorization: Bearer <token>`
//! (or `Token <token>`, as InfluxDB 2 clients do), or Basic with the name as the user and the
//! token as the password; telnet clients send `auth <token>` first. Tokens are kept only as
//! SHA-256 digests and compared in constant time with every configured digest, so neither a
//! token's length nor which entry matched shows in the time an answer takes. Nothing here
//! logs or formats a token.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use base64::Engine;
use parking_lot::RwLock;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// What a client may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Queries, suggest, lookup, and every other read.
    Read,
    /// Puts over telnet and HTTP, remote write, the line protocol.
    Write,
    /// Compaction, backup, deletes, UID assignment and renames, dropping caches.
    Admin,
}

impl Role {
    fn bit(self) -> u8 {
        match self {
            Role::Read => 1,
            Role::Write => 2,
            Role::Admin => 4,
        }
    }

    /// The role's name, as in the auth file.
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        match s {
            "read" => Some(Role::Read),
            "write" => Some(Role::Write),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// A set of roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Roles(u8);

impl Roles {
    /// True if the set holds `role`.
    pub fn has(self, role: Role) -> bool {
        self.0 & role.bit() != 0
    }

    fn with(self, role: Role) -> Roles {
        Roles(self.0 | role.bit())
    }
}

/// A client that presented a known token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The entry's `name`.
    pub name: String,
    /// The entry's roles.
    pub roles: Roles,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// No credentials, or credentials in a form this server does not take: 401.
    Missing,
    /// Credentials that match no entry: 401.
    Unknown,
    /// A known client without the role the request needs: 403.
    Forbidden {
        /// The client's name.
        name: String,
        /// The role it lacks.
        role: Role,
    },
}

impl AuthError {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> u16 {
        match self {
            AuthError::Missing | AuthError::Unknown => 401,
            AuthError::Forbidden { .. } => 403,
        }
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::Missing => f.write_str(
                "authentication required: send Authorization: Bearer <token> or Basic credentials",
            ),
            AuthError::Unknown => f.write_str("unknown credentials"),
            AuthError::Forbidden { name, role } => {
                write!(f, "'{name}' lacks the '{}' role", role.name())
            }
        }
    }
}

impl std::error::Error for AuthError {}

/// One configured client: its token only as a digest.
struct Entry {
    name: String,
    digest: [u8; 32],
    roles: Roles,
}

/// The configured tokens. Its `Debug` shows names and roles, never digests.
pub struct Auth {
    entries: Vec<Entry>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| (&e.name, e.roles)))
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    tokens: Vec<FileEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    name: String,
    token: String,
    roles: Vec<String>,
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// Equality of two digests in time that does not depend on where they differ.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

impl Auth {
    /// Reads an auth file.
    pub fn load(path: &Path) -> anyhow::Result<Auth> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the auth file {}", path.display()))?;
        Auth::parse(&text).with_context(|| format!("in the auth file {}", path.display()))
    }

    /// Parses the text of an auth file. Errors name the entry, never its token.
    pub fn parse(text: &str) -> anyhow::Result<Auth> {
        // A TOML error quotes the line it is on, which may hold a token: report only where.
        let file: File = toml::from_str(text).map_err(|e| match e.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].lines().count().max(1);
                anyhow::anyhow!("not a valid auth file (line {line})")
            }
            None => anyhow::anyhow!("not a valid auth file"),
        })?;
        if file.tokens.is_empty() {
            bail!("no [[tokens]] entries: every request would be refused");
        }
        let mut entries: Vec<Entry> = Vec::with_capacity(file.tokens.len());
        for (i, t) in file.tokens.into_iter().enumerate() {
            let which = format!("entry {} ('{}')", i + 1, t.name);
            if t.name.is_empty() || t.name.contains(':') {
                bail!("{which}: a name must be non-empty and without ':'");
            }
            if t.token.is_empty() || t.token.chars().any(char::is_whitespace) {
                bail!("{which}: a token must be non-empty and without white space");
            }
            let mut roles = Roles::default();
            for r in &t.roles {
                let role = Role::parse(r).with_context(|| {
                    format!("{which}: unknown role '{r}' (roles are read, write and admin)")
                })?;
                roles = roles.with(role);
            }
            if roles == Roles::default() {
                bail!("{which}: no roles");
            }
            let d = digest(t.token.as_bytes());
            if entries.iter().any(|e| e.name == t.name) {
                bail!("{which}: the name is used twice");
            }
            if entries.iter().any(|e| same_digest(&e.digest, &d)) {
                bail!("{which}: the token is used by another entry too");
            }
            entries.push(Entry {
                name: t.name,
                digest: d,
                roles,
            });
        }
        Ok(Auth { entries })
    }

    /// The client whose token is `token` (and whose name is `name`, when given). Every entry
    /// is compared, whichever matches.
    pub fn identify(&self, name: Option<&str>, token: &[u8]) -> Option<Identity> {
        let d = digest(token);
        let mut found: Option<&Entry> = None;
        for e in &self.entries {
            if same_digest(&e.digest, &d) {
                found = Some(e);
            }
        }
        let e = found.filter(|e| name.is_none_or(|n| n == e.name))?;
        Some(Identity {
            name: e.name.clone(),
            roles: e.roles,
        })
    }

    /// The client an HTTP `Authorization` header names, if it has `role`.
    pub fn check_header(
        &self,
        authorization: Option<&[u8]>,
        role: Role,
    ) -> Result<Identity, AuthError> {
        let header = authorization.ok_or(AuthError::Missing)?;
        let header = std::str::from_utf8(header).map_err(|_| AuthError::Missing)?;
        let (scheme, rest) = header.trim().split_once(' ').ok_or(AuthError::Missing)?;
        let rest = rest.trim();
        // `Token` is how InfluxDB 2 clients (Telegraf, the client libraries) send theirs.
        let id = if scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token") {
            self.identify(None, rest.as_bytes())
        } else if scheme.eq_ignore_ascii_case("basic") {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .map_err(|_| AuthError::Missing)?;
            let raw = String::from_utf8(raw).map_err(|_| AuthError::Missing)?;
            let (user, token) = raw.split_once(':').ok_or(AuthError::Missing)?;
            self.identify(Some(user), token.as_bytes())
        } else {
            return Err(AuthError::Missing);
        };
        let id = id.ok_or(AuthError::Unknown)?;
        Self::allow(id, role)
    }

    /// `id` if it has `role`.
    pub fn allow(id: Identity, role: Role) -> Result<Identity, AuthError> {
        if id.roles.has(role) {
            Ok(id)
        } else {
            Err(AuthError::Forbidden {
                name: id.name,
                role,
            })
        }
    }

    /// The client a telnet `auth` line names: `auth <token>`, or OpenTSDB's plugin shape
    /// `auth basic <name> <token>`.
    pub fn check_telnet_line(&self, line: &[u8]) -> Option<Identity> {
        let line = std::str::from_utf8(line).ok()?;
        let mut words = line.split_ascii_whitespace();
        if words.next() != Some("auth") {
            return None;
        }
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some(token), None, None, None) => self.identify(None, token.as_bytes()),
            (Some(scheme), Some(name), Some(token), None)
                if scheme.eq_ignore_ascii_case("basic") =>
            {
                self.identify(Some(name), token.as_bytes())
            }
            _ => None,
        }
    }
}

/// The auth file and the tokens last read from it; [`AuthFile::reload`] reads it again (on
/// SIGHUP), and a file that does not load leaves the old tokens in use.
#[derive(Debug)]
pub struct AuthFile {
    path: PathBuf,
    auth: RwLock<Arc<Auth>>,
}

impl AuthFile {
    /// Reads the auth file at `path`.
    pub fn load(path: &Path) -> anyhow::Result<AuthFile> {
        Ok(AuthFile {
            path: path.to_path_buf(),
            auth: RwLock::new(Arc::new(Auth::load(path)?)),
        })
    }

    /// Reads the file again; on an error the tokens stay as they were.
    pub fn reload(&self) -> anyhow::Result<()> {
        let fresh = Auth::load(&self.path)?;
        *self.auth.write() = Arc::new(fresh);
        Ok(())
    }

    /// The tokens in use.
    pub fn current(&self) -> Arc<Auth> {
        self.auth.read().clone()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[tokens]]
name = "grafana"
token = "read-only-secret-0123456789"
roles = ["read"]

[[tokens]]
name = "ops"
token = "ops-secret-abcdefghijklmnop"
roles = ["read", "write", "admin"]
"#;

    fn basic(user: &str, pass: &str) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        format!("Basic {b64}").into_bytes()
    }

    #[test]
    fn bearer_and_basic_identify_and_check_roles() -> anyhow::Result<()> {
        let auth = Auth::parse(FILE)?;
        let id = auth.check_header(Some(b"Bearer read-only-secret-0123456789"), Role::Read)?;
        assert_eq!(id.name, "grafana");
        assert_eq!(
            auth.check_header(Some(b"Bearer read-only-secret-0123456789"), Role::Write),
            Err(AuthError::Forbidden {
                name: "grafana".into(),
                role: Role::Write
            })
        );
        let token = b"Token ops-secret-abcdefghijklmnop";
        assert_eq!(auth.check_header(Some(token), Role::Write)?.name, "ops");
        let ops = basic("ops", "ops-secret-abcdefghijklmnop");
        assert_eq!(auth.check_header(Some(&ops), Role::Admin)?.name, "ops");
        // The right token under another entry's name is not that entry.
        let wrong_user = basic("grafana", "ops-secret-abcdefghijklmnop");
        assert_eq!(
            auth.check_header(Some(&wrong_user), Role::Read),
            Err(AuthError::Unknown)
        );
        Ok(())
    }

    #[test]
    fn missing_and_unknown_credentials_are_401() -> anyhow::Result<()> {
        let auth = Auth::parse(FILE)?;
        for header in [
            None,
            Some(&b"Bearer"[..]),
            Some(b"Digest abc"),
            Some(b"Basic !!"),
        ] {
            let err = auth.check_header(header, Role::Read).err();
            assert_eq!(err, Some(AuthError::Missing), "{header:?}");
        }
        let err = auth.check_header(Some(b"Bearer nope"), Role::Read).err();
        assert_eq!(err.as_ref().map(AuthError::status), Some(401));
        let err = auth
            .check_header(Some(b"Bearer read-only-secret-0123456789"), Role::Admin)
            .err();
        assert_eq!(err.as_ref().map(AuthError::status), Some(403));
        Ok(())
    }

    #[test]
    fn bad_files_are_refused_without_showing_tokens() {
        let cases = [
            ("", "no [[tokens]]"),
            (
                "[[tokens]]\nname = \"a\"\ntoken = \"s3cret-value\"\nroles = [\"root\"]\n",
                "unknown role 'root'",
            ),
            (
                "[[tokens]]\nname = \"a\"\ntoken = \"s3cret-value\"\nroles = []\n",
                "no roles",
            ),
            (
                "[[tokens]]\nname = \"a\"\ntoken = \"s3cret-value\"\nroles = [\"read\"]\n\
                 [[tokens]]\nname = \"b\"\ntoken = \"s3cret-value\"\nroles = [\"read\"]\n",
                "used by another entry",
            ),
            (
                "[[tokens]]\nname = \"a\"\ntoken = \"s3cret-value\"\nrole = [\"read\"]\n",
                "line",
            ),
        ];
        for (text, want) in cases {
            let err = match Auth::parse(text) {
                Ok(a) => panic!("accepted {text:?}: {a:?}"),
                Err(e) => format!("{e:#}"),
            };
            assert!(err.contains(want), "{err} (wanted {want})");
            assert!(!err.contains("s3cret"), "{err} shows a token");
        }
    }

    #[test]
    fn telnet_auth_lines_take_a_token_or_basic_credentials() -> anyhow::Result<()> {
        let auth = Auth::parse(FILE)?;
        let name = |line: &[u8]| auth.check_telnet_line(line).map(|id| id.name);
        assert_eq!(
            name(b"auth ops-secret-abcdefghijklmnop"),
            Some("ops".into())
        );
        assert_eq!(
            name(b"auth  basic grafana read-only-secret-0123456789 "),
            Some("grafana".into())
        );
        for bad in [
            &b"auth"[..],
            b"auth nope",
            b"auth basic ops read-only-secret-0123456789",
            b"auth ops-secret-abcdefghijklmnop extra",
            b"put ops-secret-abcdefghijklmnop",
            b"auth \xff",
        ] {
            assert_eq!(name(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        Ok(())
    }

    #[test]
    fn a_reload_that_fails_keeps_the_old_tokens() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("tokens.toml");
        std::fs::write(&path, FILE)?;
        let file = AuthFile::load(&path)?;
        assert!(
            file.current()
                .identify(None, b"ops-secret-abcdefghijklmnop")
                .is_some()
        );
        std::fs::write(
            &path,
            "[[tokens]]\nname = \"new\"\ntoken = \"t-2\"\nroles = [\"read\"]\n",
        )?;
        file.reload()?;
        assert!(
            file.current()
                .identify(None, b"ops-secret-abcdefghijklmnop")
                .is_none()
        );
        assert!(file.current().identify(None, b"t-2").is_some());
        std::fs::write(&path, "not toml [")?;
        assert!(file.reload().is_err());
        assert!(
            file.current().identify(None, b"t-2").is_some(),
            "the old tokens stay"
        );
        Ok(())
    }

    #[test]
    fn debug_shows_no_token() -> anyhow::Result<()> {
        let shown = format!("{:?}", Auth::parse(FILE)?);
        assert!(shown.contains("grafana"), "{shown}");
        assert!(!shown.contains("secret"), "{shown}");
        Ok(())
    }
}
