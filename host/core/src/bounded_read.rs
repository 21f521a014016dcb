//! Reading an answer from the network without trusting its size.
//!
//! Every body wfhost reads from a peer — a registry's manifest, referrers,
//! blob or token, a server's answer to an agent — is read by
//! [`read_capped`]: a declared length (`Content-Length`) over the limit is
//! refused before a byte is read, and the body is then read chunk by chunk
//! and refused as soon as it passes the limit, whatever was declared. So a
//! hostile or broken peer costs at most the limit (and one chunk) of
//! memory, however long or endless its answer.

use std::fmt::Display;

use futures_util::{Stream, StreamExt};

/// Why a capped read failed.
#[derive(Debug)]
pub enum CappedError<E> {
    /// The answer is (or declared itself) larger than the limit. One line
    /// naming what was read and the limit.
    TooLarge(String),
    /// The transfer failed.
    Read(E),
}

impl<E: Display> Display for CappedError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CappedError::TooLarge(message) => f.write_str(message),
            CappedError::Read(e) => e.fmt(f),
        }
    }
}

/// Read the body `chunks` whole if it is at most `limit` bytes. `declared`
/// is the length the peer announced, if any: over the limit, nothing is
/// read; under it, it is only a hint (the limit is what stops the read).
/// `what` names the answer (and where it came from) in the error.
pub async fn read_capped<S, B, E>(
    chunks: S,
    declared: Option<u64>,
    limit: u64,
    what: impl Display,
) -> Result<Vec<u8>, CappedError<E>>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    if let Some(declared) = declared.filter(|n| *n > limit) {
        return Err(too_large(&what, limit, Some(declared)));
    }
    let mut chunks = std::pin::pin!(chunks);
    // The declared length is the usual size; never more than the limit.
    let mut body = Vec::with_capacity(declared.unwrap_or(0).min(limit) as usize);
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(CappedError::Read)?;
        let chunk = chunk.as_ref();
        if (body.len() as u64).saturating_add(chunk.len() as u64) > limit {
            return Err(too_large(&what, limit, declared));
        }
        body.extend_from_slice(chunk);
    }
    Ok(body)
}

fn too_large<E>(what: &impl Display, limit: u64, declared: Option<u64>) -> CappedError<E> {
    let declared = match declared {
        Some(n) if n > limit => format!(" (it declared {n} bytes)"),
        _ => String::new(),
    };
    CappedError::TooLarge(format!(
        "{what} is larger than the limit of {}{declared}",
        human_size(limit)
    ))
}

/// `4 MiB`, `64 KiB`, or `1234 bytes`.
pub fn human_size(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn read(
        chunks: Vec<Result<Vec<u8>, String>>,
        declared: Option<u64>,
        limit: u64,
    ) -> Result<Vec<u8>, CappedError<String>> {
        block_on(read_capped(
            stream::iter(chunks),
            declared,
            limit,
            "the answer",
        ))
    }

    #[test]
    fn a_body_up_to_the_limit_is_read_whole() {
        let body = read(vec![Ok(b"abc".to_vec()), Ok(b"de".to_vec())], None, 5).unwrap();
        assert_eq!(body, b"abcde");
        let body = read(vec![Ok(b"abcde".to_vec())], Some(5), 5).unwrap();
        assert_eq!(body, b"abcde");
    }

    #[test]
    fn a_body_past_the_limit_is_refused_naming_the_limit() {
        let err = read(vec![Ok(vec![0; 4 << 20]), Ok(vec![0])], None, 4 << 20).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the answer is larger than the limit of 4 MiB"
        );
        // Declared small, sent large: the limit stops it, not the claim.
        let err = read(vec![Ok(vec![0; 3]), Ok(vec![0; 3])], Some(2), 5).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the answer is larger than the limit of 5 bytes"
        );
    }

    #[test]
    fn a_declared_length_over_the_limit_is_refused_before_reading() {
        let never = stream::poll_fn(|_| -> std::task::Poll<Option<Result<Vec<u8>, String>>> {
            panic!("nothing is read")
        });
        let err = block_on(read_capped(never, Some(300 << 20), 64 << 10, "the token")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the token is larger than the limit of 64 KiB (it declared 314572800 bytes)"
        );
    }

    #[test]
    fn an_endless_body_stops_at_the_limit() {
        let mut sent = 0u64;
        let endless = stream::repeat_with(move || {
            sent += 1 << 16;
            assert!(sent < 2 << 20, "read on past the limit");
            Ok::<_, String>(vec![7u8; 1 << 16])
        });
        let err = block_on(read_capped(endless, None, 1 << 20, "x")).unwrap_err();
        assert!(matches!(err, CappedError::TooLarge(_)), "{err}");
    }

    #[test]
    fn transfer_errors_pass_through() {
        let err = read(vec![Ok(vec![1]), Err("reset".into())], None, 5).unwrap_err();
        assert!(
            matches!(err, CappedError::Read(ref e) if e == "reset"),
            "{err}"
        );
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_size(4 << 20), "4 MiB");
        assert_eq!(human_size(64 << 10), "64 KiB");
        assert_eq!(human_size(1234), "1234 bytes");
        assert_eq!(human_size(256 << 20), "256 MiB");
    }
}
