//! Request bodies: JSON, at most [`crate::MAX_BODY_BYTES`]. A body that does
//! not parse or does not fit the endpoint's shape is a 400 whose details
//! name the JSON pointer of the offending value; one over the limit is a
//! 413 naming the limit.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::ApiError;

/// A JSON body of type `T` (an empty body reads as `{}` when `T` allows it).
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large()
            } else {
                ApiError::bad_request(format!("cannot read the request body: {}", e.body_text()))
            }
        })?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        // Every body is an object: serde would read an array as a struct's
        // fields in order, and complain about the wrong thing.
        if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(
                ApiError::bad_request("the request body must be a JSON object")
                    .with_details(json!({"pointer": ""})),
            );
        }
        parse(text).map(JsonBody)
    }
}

/// The 413 for a body over the limit.
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!(
            "the request body is over the limit of {} bytes",
            crate::MAX_BODY_BYTES
        ),
    )
    .with_details(json!({"limit_bytes": crate::MAX_BODY_BYTES}))
}

/// Parse `text` as a `T`, or a 400 naming where it went wrong.
pub fn parse<T: DeserializeOwned>(text: &[u8]) -> Result<T, ApiError> {
    let invalid = |pointer: String, inner: &serde_json::Error| {
        let at = if pointer.is_empty() { "/" } else { &pointer };
        ApiError::bad_request(format!("the request body is invalid at {at}: {inner}")).with_details(
            json!({
                "pointer": pointer,
                "line": inner.line(),
                "column": inner.column(),
            }),
        )
    };
    let mut de = serde_json::Deserializer::from_slice(text);
    let value: T = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| invalid(wfhost_core::json_pointer::of_path(e.path()), e.inner()))?;
    de.end().map_err(|e| invalid(String::new(), &e))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Shape {
        reason: Option<String>,
        items: Vec<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        #[serde(rename = "a/b")]
        n: u32,
    }

    #[test]
    fn errors_name_the_json_pointer_of_the_bad_value() {
        let err = parse::<Shape>(br#"{"items": [{"a/b": 1}, {"a/b": "x"}]}"#).unwrap_err();
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
        assert_eq!(err.details["pointer"], "/items/1/a~1b", "{err:?}");
        let err = parse::<Shape>(br#"{"items": [], "extra": 1}"#).unwrap_err();
        assert!(err.message.contains("unknown field `extra`"), "{err:?}");
        let err = parse::<Shape>(b"{\"items\": [").unwrap_err();
        assert_eq!(err.details["line"], 1);
        let err = parse::<Shape>(br#"{"items": []} trailing"#).unwrap_err();
        assert!(err.message.contains("trailing"), "{err:?}");
        assert!(parse::<Shape>(br#"{"items": []}"#).is_ok());
    }
}
