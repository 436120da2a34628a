//! Where `--store` points: `s3://bucket/prefix` or `file:///dir`.

use std::fmt;
use std::path::PathBuf;

/// A parsed `--store` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// An S3 bucket and the key prefix every object of this database goes under (no leading
    /// or trailing `/`; empty for the bucket's root).
    S3 {
        /// The bucket name.
        bucket: String,
        /// The key prefix, `/`-separated segments.
        prefix: String,
    },
    /// A local directory standing in for a bucket, for tests and for trying the object-store
    /// path on one machine. It must exist; it is not shared between machines.
    File {
        /// The absolute directory path.
        dir: PathBuf,
    },
}

impl StoreLocation {
    /// Parses `s3://bucket[/prefix]` or `file:///absolute/dir`. The error names the
    /// `store` setting and says what is wrong.
    pub fn parse(url: &str) -> anyhow::Result<StoreLocation> {
        let url = url.trim();
        let bad = |why: &str| {
            anyhow::anyhow!(
                "bad `store` setting {url:?}: {why} (use s3://bucket/prefix or file:///dir)"
            )
        };
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            check_bucket(bucket).map_err(|why| bad(&why))?;
            let prefix = prefix.trim_end_matches('/');
            check_prefix(prefix).map_err(|why| bad(&why))?;
            return Ok(StoreLocation::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.to_string(),
            });
        }
        if let Some(path) = url.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(bad("a file URL needs an absolute path, file:///dir"));
            }
            return Ok(StoreLocation::File { dir: path.into() });
        }
        Err(bad("the scheme must be s3:// or file://"))
    }

    /// The key prefix under which this database's objects live; empty for a file store,
    /// whose directory is the root.
    pub fn prefix(&self) -> &str {
        match self {
            StoreLocation::S3 { prefix, .. } => prefix,
            StoreLocation::File { .. } => "",
        }
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            StoreLocation::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            StoreLocation::File { dir } => write!(f, "file://{}", dir.display()),
        }
    }
}

/// S3's bucket naming rules: 3 to 63 lower-case letters, digits, `.` and `-`, starting and
/// ending with a letter or digit.
fn check_bucket(b: &str) -> Result<(), String> {
    if b.is_empty() {
        return Err("no bucket name".into());
    }
    if !(3..=63).contains(&b.len()) {
        return Err(format!("bucket name {b:?} must be 3 to 63 characters"));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-';
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !b.chars().all(allowed) || !alnum(b.chars().next()) || !alnum(b.chars().last()) {
        return Err(format!(
            "bucket name {b:?} may hold only a-z, 0-9, '.' and '-', and must start and end \
             with a letter or digit"
        ));
    }
    Ok(())
}

/// A prefix is `/`-separated segments, none empty, `.` or `..`, without control characters or
/// `\`, which object_store refuses in paths.
fn check_prefix(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Ok(());
    }
    for seg in p.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(format!("prefix {p:?} has an empty, '.' or '..' segment"));
        }
        if seg.chars().any(|c| c.is_control() || c == '\\') {
            return Err(format!("prefix {p:?} has a control character or '\\'"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_and_file_urls_parse() -> anyhow::Result<()> {
        let s3 = |bucket: &str, prefix: &str| StoreLocation::S3 {
            bucket: bucket.into(),
            prefix: prefix.into(),
        };
        assert_eq!(StoreLocation::parse("s3://strata")?, s3("strata", ""));
        assert_eq!(StoreLocation::parse("s3://strata/")?, s3("strata", ""));
        assert_eq!(
            StoreLocation::parse(" s3://my.bucket-1/prod/tsdb/ ")?,
            s3("my.bucket-1", "prod/tsdb")
        );
        assert_eq!(
            StoreLocation::parse("file:///var/lib/bucket")?,
            StoreLocation::File {
                dir: "/var/lib/bucket".into()
            }
        );
        assert_eq!(
            StoreLocation::parse("s3://b12/p")?.to_string(),
            "s3://b12/p"
        );
        assert_eq!(StoreLocation::parse("s3://b12")?.prefix(), "");
        Ok(())
    }

    #[test]
    fn bad_urls_name_the_setting_and_the_problem() {
        for (url, why) in [
            ("strata", "scheme"),
            ("http://x/y", "scheme"),
            ("s3://", "no bucket"),
            ("s3:///p", "no bucket"),
            ("s3://ab/p", "3 to 63"),
            ("s3://Upper/p", "a-z"),
            ("s3://-ab/p", "start and end"),
            ("s3://abc/a//b", "empty"),
            ("s3://abc/a/../b", "'..'"),
            ("s3://abc/a\\b", "'\\'"),
            ("file://relative/dir", "absolute"),
        ] {
            let err = StoreLocation::parse(url).err().map(|e| e.to_string());
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.contains("`store`") && e.contains(why)),
                "{url}: {err:?}"
            );
        }
    }
}
