//! Unguessable identifiers: lease tokens, workspace identities, the
//! addresses a block's agents send telemetry to.

use std::io::Read;

/// 128 random bits from the kernel, as 32 hex digits.
pub fn token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_are_32_hex_digits_and_differ() {
        let (a, b) = (super::token().unwrap(), super::token().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
