//! Bounded YAML/JSON decoding into [`serde_json::Value`] documents, for manifests and the
//! kubelet's configuration file.
//!
//! Every input costs work bounded by its size, whatever it contains:
//! - the input itself is at most [`Limits::max_bytes`] long;
//! - the decoded documents are at most [`Limits::max_depth`] collections deep;
//! - YAML anchors and aliases are resolved, but the *expanded* size of all documents (every
//!   scalar's length plus one per node, aliases counted each time they are used) may not
//!   exceed twice the input's length plus [`Limits::alias_allowance`]. A document without
//!   aliases always fits (each node costs at least one input byte and a scalar never decodes
//!   longer than its source), so only an alias bomb ("billion laughs") is refused — and it is
//!   refused as soon as the budget runs out, before the expansion is built.
//!
//! The budget is checked by the visitor that builds the [`Value`], so the parser's own replay
//! of aliases stops at the first node over the budget.

use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Limits of one decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest input accepted, in bytes.
    pub max_bytes: usize,
    /// The deepest nesting of mappings and sequences accepted.
    pub max_depth: usize,
    /// Extra expanded size allowed beyond twice the input (aliases in small files).
    pub alias_allowance: usize,
}

/// The limits for pod manifests (a file of the manifest path, or the URL's body): 4 MiB (the
/// API server refuses pods over 3 MiB, etcd over 1.5 MiB), 64 levels (a pod is about a dozen
/// deep), 64 KiB of alias expansion.
pub const MANIFEST_LIMITS: Limits = Limits {
    max_bytes: 4 << 20,
    max_depth: 64,
    alias_allowance: 64 << 10,
};

/// Why an input was not decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input is longer than [`Limits::max_bytes`].
    #[error("{size} bytes is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The input's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The input is not UTF-8.
    #[error("not UTF-8: {0}")]
    NotUtf8(std::str::Utf8Error),
    /// The documents nest deeper than [`Limits::max_depth`].
    #[error("nested deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// YAML aliases expand the documents beyond the budget.
    #[error("YAML aliases expand the document beyond {limit} bytes (an alias bomb?)")]
    Expansion {
        /// The budget.
        limit: usize,
    },
    /// The text is not valid YAML/JSON.
    #[error("{0}")]
    Syntax(String),
}

/// What decoding has left to spend, and the first limit it hit.
struct Budget {
    remaining: usize,
    limit: usize,
    max_depth: usize,
    exceeded: Option<DecodeError>,
}

impl Budget {
    fn new(input_len: usize, limits: &Limits) -> Budget {
        let limit = input_len
            .saturating_mul(2)
            .saturating_add(limits.alias_allowance);
        Budget {
            remaining: limit,
            limit,
            max_depth: limits.max_depth,
            exceeded: None,
        }
    }

    fn charge<E: serde::de::Error>(&mut self, cost: usize) -> Result<(), E> {
        match self.remaining.checked_sub(cost) {
            Some(r) => {
                self.remaining = r;
                Ok(())
            }
            None => {
                let e = DecodeError::Expansion { limit: self.limit };
                let msg = e.to_string();
                self.exceeded.get_or_insert(e);
                Err(E::custom(msg))
            }
        }
    }

    fn enter<E: serde::de::Error>(&mut self, depth: usize) -> Result<(), E> {
        if depth >= self.max_depth {
            let e = DecodeError::TooDeep {
                limit: self.max_depth,
            };
            let msg = e.to_string();
            self.exceeded.get_or_insert(e);
            return Err(E::custom(msg));
        }
        self.charge(1)
    }

    /// The error to report: the limit hit, when one was, else the parser's message.
    fn error(&mut self, parser: String) -> DecodeError {
        self.exceeded.take().unwrap_or(DecodeError::Syntax(parser))
    }
}

/// Builds a [`Value`] charging the budget for every node it creates.
struct ValueSeed<'b> {
    budget: &'b mut Budget,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML/JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.budget.charge(1)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.budget.charge(1)?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.budget.charge(1)?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.budget.charge(1)?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.budget.charge(v.len().saturating_add(1))?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.budget.charge(v.len().saturating_add(1))?;
        Ok(Value::String(v))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.budget.charge(1)?;
        Ok(Value::Null)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.budget.charge(1)?;
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.budget.enter(self.depth)?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(ValueSeed {
            budget: &mut *self.budget,
            depth: self.depth + 1,
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.budget.enter(self.depth)?;
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed {
            budget: &mut *self.budget,
        })? {
            let value = map.next_value_seed(ValueSeed {
                budget: &mut *self.budget,
                depth: self.depth + 1,
            })?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// A mapping key: a string (YAML scalars are read as their text), charged to the budget.
struct KeySeed<'b> {
    budget: &'b mut Budget,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = String;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        let key = String::deserialize(d)?;
        self.budget.charge(key.len().saturating_add(1))?;
        Ok(key)
    }
}

use serde::Deserialize as _;

/// Decodes a JSON stream (when the text starts with `{` or `[`) or a YAML stream of one or
/// more documents into one [`Value`] per document; YAML documents that are empty (null) are
/// left out. See the module docs for the limits.
pub fn decode_documents(bytes: &[u8], limits: &Limits) -> Result<Vec<Value>, DecodeError> {
    if bytes.len() > limits.max_bytes {
        return Err(DecodeError::TooLarge {
            size: bytes.len(),
            limit: limits.max_bytes,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(DecodeError::NotUtf8)?;
    let mut budget = Budget::new(bytes.len(), limits);
    let trimmed = text.trim_start();
    let mut docs = Vec::new();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut de = serde_json::Deserializer::from_str(trimmed);
        loop {
            // `end` succeeds only at the end of the input (trailing whitespace allowed).
            if de.end().is_ok() {
                return Ok(docs);
            }
            let seed = ValueSeed {
                budget: &mut budget,
                depth: 0,
            };
            match seed.deserialize(&mut de) {
                Ok(v) => docs.push(v),
                Err(e) => return Err(budget.error(e.to_string())),
            }
        }
    }
    for de in serde_yaml_ng::Deserializer::from_str(text) {
        let seed = ValueSeed {
            budget: &mut budget,
            depth: 0,
        };
        match seed.deserialize(de) {
            Ok(Value::Null) => {}
            Ok(v) => docs.push(v),
            Err(e) => return Err(budget.error(e.to_string())),
        }
    }
    Ok(docs)
}

/// Decodes exactly one document (YAML or JSON); an empty input is `Value::Null`.
pub fn decode_one(bytes: &[u8], limits: &Limits) -> Result<Value, DecodeError> {
    let mut docs = decode_documents(bytes, limits)?;
    match docs.len() {
        0 => Ok(Value::Null),
        1 => Ok(docs.remove(0)),
        n => Err(DecodeError::Syntax(format!(
            "expected one document, found {n}"
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn decode(text: &str) -> Result<Vec<Value>, DecodeError> {
        decode_documents(text.as_bytes(), &MANIFEST_LIMITS)
    }

    #[test]
    fn plain_yaml_and_json() {
        let docs = decode("a: 1\nb: [x, {c: true}]\n---\n---\nd: ~\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["b"][1]["c"], Value::Bool(true));
        let docs = decode(r#"{"a": 1} {"b": [1.5, null]}"#).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1]["b"][0], serde_json::json!(1.5));
        assert!(matches!(decode("{\"a\": "), Err(DecodeError::Syntax(_))));
        assert!(matches!(decode("a: [b"), Err(DecodeError::Syntax(_))));
    }

    #[test]
    fn small_aliases_are_resolved() {
        let docs = decode("x: &a {k: v}\ny: *a\nz: *a\n").unwrap();
        assert_eq!(docs[0]["z"]["k"], Value::String("v".into()));
    }

    #[test]
    fn an_alias_bomb_is_refused_quickly() {
        let mut text = String::from(
            "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for i in 1..10 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
            ));
        }
        let started = kubelet_core::clock::monotonic_now();
        let err = decode(&text).unwrap_err();
        assert!(matches!(err, DecodeError::Expansion { .. }), "{err}");
        assert!(kubelet_core::clock::elapsed(started) < std::time::Duration::from_secs(2));
        // One big anchored scalar used many times.
        let big = "x".repeat(100_000);
        let refs = vec!["*s"; 2000].join(",");
        let err = decode(&format!("s: &s {big}\nl: [{refs}]\n")).unwrap_err();
        assert!(matches!(err, DecodeError::Expansion { .. }), "{err}");
    }

    #[test]
    fn depth_and_size_are_bounded() {
        let deep = format!("{}1{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(decode(&deep), Err(DecodeError::TooDeep { limit: 64 }));
        let yaml_deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert!(decode(&yaml_deep.replace('[', "- [")).is_err());
        let ok = format!("{}1{}", "[".repeat(60), "]".repeat(60));
        assert!(decode(&ok).is_ok());
        let huge = vec![b' '; MANIFEST_LIMITS.max_bytes + 1];
        assert!(matches!(
            decode_documents(&huge, &MANIFEST_LIMITS),
            Err(DecodeError::TooLarge { .. })
        ));
        assert!(matches!(
            decode_documents(b"a: \xff\xfe", &MANIFEST_LIMITS),
            Err(DecodeError::NotUtf8(_))
        ));
    }
}
