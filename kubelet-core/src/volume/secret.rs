//! `secret` volumes (and secret sources of projected volumes): as [`super::configmap`], over
//! the secret's `data`, on a tmpfs so secrets never reach the node's disk.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;

/// A secret's `data` (and `stringData`, which only unsubmitted objects carry) as bytes.
pub fn data_of(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in s.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone().into_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn data_and_string_data() {
        let s = Secret {
            data: Some([("a".to_string(), ByteString(b"x".to_vec()))].into()),
            string_data: Some([("b".to_string(), "y".to_string())].into()),
            ..Default::default()
        };
        let d = data_of(&s);
        assert_eq!(d["a"], b"x");
        assert_eq!(d["b"], b"y");
    }
}
