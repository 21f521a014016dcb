//! JSON that a person wrote, read strictly: an object that names the same
//! key twice is refused with its line and column, instead of the last
//! value silently winning (`serde_json` keeps the last one).

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Check `text` for duplicate object keys at any depth. Syntax errors are
/// reported too, with their line and column.
pub fn check_no_duplicate_keys(text: &str) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    NoDuplicates::deserialize(&mut de)?;
    de.end()
}

/// A JSON value that is only walked, never kept.
struct NoDuplicates;

impl<'de> Deserialize<'de> for NoDuplicates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Walk)
    }
}

struct Walk;

impl<'de> Visitor<'de> for Walk {
    type Value = NoDuplicates;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_i64<E>(self, _: i64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_u64<E>(self, _: u64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_f64<E>(self, _: f64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_str<E>(self, _: &str) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_unit<E>(self) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NoDuplicates, A::Error> {
        while seq.next_element::<NoDuplicates>()?.is_some() {}
        Ok(NoDuplicates)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NoDuplicates, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{key}` in one object"
                )));
            }
            map.next_value::<NoDuplicates>()?;
        }
        Ok(NoDuplicates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_distinct_keys_at_every_depth() {
        check_no_duplicate_keys(r#"{"a": {"b": 1, "c": [ {"b": 2}, {"b": 3} ]}, "b": null}"#)
            .unwrap();
    }

    #[test]
    fn refuses_a_duplicate_with_its_line_and_column() {
        let text = "{\n  \"nodes\": {\n    \"a\": {},\n    \"a\": {}\n  }\n}";
        let err = check_no_duplicate_keys(text).unwrap_err();
        assert!(err.to_string().contains("duplicate key `a`"), "{err}");
        assert_eq!(err.line(), 4);
    }

    #[test]
    fn refuses_duplicates_inside_arrays_and_trailing_text() {
        assert!(check_no_duplicate_keys(r#"[{"x": 1, "x": 2}]"#).is_err());
        assert!(check_no_duplicate_keys(r#"{"x": 1} {"#).is_err());
    }
}
