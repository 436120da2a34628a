//! Reading a request body: the size limit, the idle timeout and gzip.

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Request, StatusCode};

use crate::resp::{Resp, error, raw};
use crate::shared::Shared;

/// Reads a request body up to the configured limit, gunzipping it when the client says so. A
/// body that pauses for longer than `http_idle_timeout_ms` gets a 408.
pub(crate) async fn read_body(req: Request<Incoming>, shared: &Shared) -> Result<Vec<u8>, Resp> {
    use http_body_util::{BodyExt, Limited};
    let gzip = req
        .headers()
        .get(hyper::header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    let max = shared.config.max_body_bytes;
    let pause = shared.config.http_idle_timeout;
    let mut body = Limited::new(req.into_body(), max);
    // A body mostly comes in one chunk, handed on without a copy.
    let mut chunks: Vec<Bytes> = Vec::new();
    loop {
        let frame = match pause {
            Some(pause) => match tokio::time::timeout(pause, body.frame()).await {
                Ok(frame) => frame,
                Err(_) => {
                    shared
                        .metrics
                        .connections_timed_out
                        .with_label_values(&[crate::metrics::phase::HTTP_BODY])
                        .inc();
                    let mut resp = error(
                        StatusCode::REQUEST_TIMEOUT,
                        "Request body timed out",
                        &format!(
                            "no byte of the body came for {} ms (http_idle_timeout_ms)",
                            pause.as_millis()
                        ),
                    );
                    resp.headers_mut()
                        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                    return Err(resp);
                }
            },
            None => body.frame().await,
        };
        match frame {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    chunks.push(data);
                }
            }
            Some(Err(e))
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some() =>
            {
                return Err(too_large(max));
            }
            Some(Err(e)) => {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    "Unable to read the request body",
                    &e.to_string(),
                ));
            }
        }
    }
    let body = match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.swap_remove(0),
        _ => Bytes::from(chunks.concat()),
    };
    decode_body(body, gzip, max).map_err(|e| raw(e.status(), e.to_json()))
}

/// The 413 for a body over `max_body_bytes`. The connection closes after it: the rest of the
/// body is not read.
pub(crate) fn too_large(max: usize) -> Resp {
    let mut resp = error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "Request body too large",
        &format!("the body is larger than the {max} byte limit (max_body_bytes)"),
    );
    resp.headers_mut()
        .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Compressed gzip bodies from this size are inflated off the async worker: JSON puts expand
/// five- to tenfold, so this is a few hundred µs of inflating and up, against the 20 µs the
/// handover costs.
const OFFLOAD_GZIP_BYTES: usize = 8 << 10;

/// A request body as the handlers take it: gunzipped if `gzip`, at most `max` bytes. A large
/// gzip body is inflated off the async worker (see [`crate::put`] for why), and a plain body
/// is handed on without a copy.
pub(crate) fn decode_body(
    body: Bytes,
    gzip: bool,
    max: usize,
) -> Result<Vec<u8>, strata_ingest::BodyError> {
    let inflate = || match strata_ingest::decode_body(&body, gzip, max)? {
        std::borrow::Cow::Owned(inflated) => Ok(Some(inflated)),
        std::borrow::Cow::Borrowed(_) => Ok(None),
    };
    let inflated = if gzip && body.len() >= OFFLOAD_GZIP_BYTES {
        tokio::task::block_in_place(inflate)
    } else {
        inflate()
    }?;
    Ok(inflated.unwrap_or_else(|| Vec::from(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large gzip body is inflated with the worker's other tasks running meanwhile; before,
    /// they waited for the whole of it. Plain bodies come back as they were.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_large_gzip_body_leaves_the_worker_to_other_tasks() -> anyhow::Result<()> {
        use std::io::Write;
        let plain: Vec<u8> = (0..400_000)
            .flat_map(|i| format!("{{\"metric\":\"m\",\"value\":{i}}},").into_bytes())
            .collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain)?;
        let gz = Bytes::from(gz.finish()?);
        assert!(gz.len() >= OFFLOAD_GZIP_BYTES);
        assert_eq!(
            decode_body(Bytes::from(plain.clone()), false, 64 << 20).ok(),
            Some(plain.clone())
        );
        let (inflated, during) =
            crate::shared::turns_beside(async move { decode_body(gz, true, 64 << 20).ok() })
                .await?;
        assert!(
            inflated == Some(plain),
            "the body did not inflate to what was sent"
        );
        assert!(during > 0, "no other task ran while the body was inflated");
        Ok(())
    }
}
