//! Replies to `/api/put` (OpenTSDB's `PutDataPointRpc`): `204` when all is well, the
//! `?summary` / `?details` count objects, and OpenTSDB's error JSON.

use serde::Serialize;
use serde::ser::SerializeMap as _;

use crate::error::{PutPointError, error_json};

/// What the client asked for with the query string. `details` wins over `summary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// Neither flag: `204` or an error body.
    Plain,
    /// `?summary`: counts.
    Summary,
    /// `?details`: counts and the failed points.
    Details,
}

impl ReplyMode {
    /// The mode for the presence of the `summary` and `details` flags (any value means set).
    pub fn from_flags(summary: bool, details: bool) -> Self {
        match (summary, details) {
            (_, true) => ReplyMode::Details,
            (true, false) => ReplyMode::Summary,
            (false, false) => ReplyMode::Plain,
        }
    }
}

/// An HTTP reply: status and body (`application/json; charset=UTF-8` unless empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutResponse {
    /// The status code.
    pub status: u16,
    /// The body; empty for `204`.
    pub body: Vec<u8>,
}

#[derive(Serialize)]
struct ErrorEntry<'a> {
    datapoint: &'a DatapointEcho,
    error: String,
}

#[derive(Serialize)]
struct Summary<'a> {
    success: u64,
    failed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<Vec<ErrorEntry<'a>>>,
}

fn to_json<T: Serialize>(v: &T) -> Vec<u8> {
    // Serialising these plain structs cannot fail; fall back to an empty object regardless.
    serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec())
}

/// A rejected point, echoed the way OpenTSDB's `?details` reply shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PutFailure {
    /// The point's position in the body (0 for a single object).
    pub index: usize,
    /// The point as parsed.
    pub datapoint: DatapointEcho,
    /// Why the point was not stored; `Display` is OpenTSDB's message.
    pub error: PutPointError,
}

/// A point as parsed, serialised like OpenTSDB's `IncomingDataPoint`: `metric`, `timestamp`
/// (0 when missing or invalid), `value` (as a string), `tags`; absent fields are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DatapointEcho {
    /// The metric, if the field was present and not null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The timestamp, 0 when missing or invalid.
    pub timestamp: i64,
    /// The value's text, if present and not null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The tags in body order, if present and not null; a null tag value stays null.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_tags")]
    pub tags: Option<Vec<(String, Option<String>)>>,
}

fn ser_tags<S: serde::Serializer>(
    tags: &Option<Vec<(String, Option<String>)>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let tags = tags.as_deref().unwrap_or_default();
    let mut map = s.serialize_map(Some(tags.len()))?;
    for (k, v) in tags {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

impl PutResponse {
    /// Builds the reply per OpenTSDB's `PutDataPointRpc`: `success` points were queued,
    /// `invalid` failed validation, `storage` failed in the storage layer (with `?sync`).
    ///
    /// | mode | all good | some invalid | storage failures only |
    /// |---|---|---|---|
    /// | plain | 204 | 400 error | 400 error |
    /// | summary/details | 200 counts | 400 counts | 200 counts (OpenTSDB quirk) |
    pub fn build(
        mode: ReplyMode,
        success: u64,
        invalid: &[PutFailure],
        storage: &[PutFailure],
    ) -> Self {
        let failed = (invalid.len() + storage.len()) as u64;
        match mode {
            ReplyMode::Plain if failed == 0 => PutResponse {
                status: 204,
                body: Vec::new(),
            },
            ReplyMode::Plain => PutResponse {
                status: 400,
                body: error_json(
                    400,
                    "One or more data points had errors",
                    Some("Please see the TSD logs or append \"details\" to the put request"),
                ),
            },
            ReplyMode::Summary | ReplyMode::Details => {
                let errors = (mode == ReplyMode::Details).then(|| {
                    invalid
                        .iter()
                        .chain(storage)
                        .map(|f| ErrorEntry {
                            datapoint: &f.datapoint,
                            error: f.error.to_string(),
                        })
                        .collect()
                });
                let status = if invalid.is_empty() { 200 } else { 400 };
                PutResponse {
                    status,
                    body: to_json(&Summary {
                        success,
                        failed,
                        errors,
                    }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(value: &str, host: &str, error: PutPointError) -> PutFailure {
        PutFailure {
            index: 1,
            datapoint: DatapointEcho {
                metric: Some("sys.cpu.nice".into()),
                timestamp: 1346846400,
                value: Some(value.into()),
                tags: Some(vec![("host".into(), Some(host.into()))]),
            },
            error,
        }
    }

    fn body(r: &PutResponse) -> &str {
        std::str::from_utf8(&r.body).unwrap()
    }

    #[test]
    fn plain_replies() {
        let ok = PutResponse::build(ReplyMode::Plain, 3, &[], &[]);
        assert_eq!(
            ok,
            PutResponse {
                status: 204,
                body: Vec::new()
            }
        );
        let f = [failure("x", "web02", PutPointError::InvalidValue)];
        let bad = PutResponse::build(ReplyMode::Plain, 1, &f, &[]);
        assert_eq!(bad.status, 400);
        assert_eq!(
            body(&bad),
            r#"{"error":{"code":400,"message":"One or more data points had errors","details":"Please see the TSD logs or append \"details\" to the put request"}}"#
        );
        assert_eq!(PutResponse::build(ReplyMode::Plain, 1, &[], &f).status, 400);
    }

    #[test]
    fn summary_and_details_match_the_spec_example() {
        let f = [failure("x", "web02", PutPointError::InvalidValue)];
        let r = PutResponse::build(ReplyMode::Details, 1, &f, &[]);
        assert_eq!(r.status, 400);
        assert_eq!(
            body(&r),
            r#"{"success":1,"failed":1,"errors":[{"datapoint":{"metric":"sys.cpu.nice","timestamp":1346846400,"value":"x","tags":{"host":"web02"}},"error":"Unable to parse value to a number"}]}"#
        );
        let r = PutResponse::build(ReplyMode::Summary, 1, &f, &[]);
        assert_eq!((r.status, body(&r)), (400, r#"{"success":1,"failed":1}"#));
        let r = PutResponse::build(ReplyMode::Summary, 2, &[], &[]);
        assert_eq!((r.status, body(&r)), (200, r#"{"success":2,"failed":0}"#));
        let r = PutResponse::build(ReplyMode::Details, 2, &[], &[]);
        assert_eq!(
            (r.status, body(&r)),
            (200, r#"{"success":2,"failed":0,"errors":[]}"#)
        );
        // Storage failures only: 200 with failed > 0, as OpenTSDB does.
        let r = PutResponse::build(ReplyMode::Summary, 1, &[], &f);
        assert_eq!((r.status, body(&r)), (200, r#"{"success":1,"failed":1}"#));
    }

    #[test]
    fn flags() {
        assert_eq!(ReplyMode::from_flags(true, true), ReplyMode::Details);
        assert_eq!(ReplyMode::from_flags(true, false), ReplyMode::Summary);
        assert_eq!(ReplyMode::from_flags(false, false), ReplyMode::Plain);
    }

    #[test]
    fn error_json_shape() {
        assert_eq!(
            std::str::from_utf8(&error_json(404, "Endpoint not found", None)).unwrap(),
            r#"{"error":{"code":404,"message":"Endpoint not found"}}"#
        );
    }
}
