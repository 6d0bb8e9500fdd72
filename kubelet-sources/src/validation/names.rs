//! Name rules (Go's `k8s.io/apimachinery/pkg/util/validation`): each function returns Go's
//! messages for what is wrong with the value, an empty list when it is valid.

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const ENV_VAR_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const C_IDENTIFIER_FMT: &str = "[A-Za-z_][A-Za-z0-9_]*";

/// Longest DNS-1123 label.
pub const DNS1123_LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;

fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn alnum_lower(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn matches_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && alnum_lower(b[0])
        && alnum_lower(b[b.len() - 1])
        && b.iter().all(|&c| alnum_lower(c) || c == b'-')
}

/// Is `s` a DNS-1123 label (at most 63 lower-case alphanumerics or '-', starting and ending
/// with an alphanumeric)?
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= DNS1123_LABEL_MAX && matches_label(s)
}

/// Is `s` a DNS-1123 subdomain (at most 253 characters; dot-separated DNS-1123 labels)?
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= DNS1123_SUBDOMAIN_MAX && s.split('.').all(matches_label)
}

/// Go's `IsDNS1123Label`.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        out.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !matches_label(s) {
        out.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    out
}

/// Go's `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        out.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if s.is_empty() || !s.split('.').all(matches_label) {
        out.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    out
}

/// Go's `NameIsDNSSubdomain` with `prefix`: a generateName prefix may end in '-'.
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    let name = if prefix {
        name.strip_suffix('-').unwrap_or(name)
    } else {
        name
    };
    dns1123_subdomain(name)
}

fn matches_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Go's `IsQualifiedName` (label and annotation keys: `[prefix/]name`).
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push(format!("prefix part {}", "must be non-empty"));
            } else {
                for msg in dns1123_subdomain(prefix) {
                    out.push(format!("prefix part {msg}"));
                }
            }
            *name
        }
        _ => {
            out.push(regex_error(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"],
            ) + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
            return out;
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        out.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_qualified_part(name) {
        out.push(format!(
            "name part {}",
            regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"],
            )
        ));
    }
    out
}

/// Go's `IsValidLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > 63 {
        out.push(max_len_error(63));
    }
    if !value.is_empty() && !matches_qualified_part(value) {
        out.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    out
}

/// Go's `IsEnvVarName`.
pub fn env_var_name(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && !b[0].is_ascii_digit()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !ok {
        out.push(regex_error(
            "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit",
            ENV_VAR_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    out.extend(ch_dir_prefix(value));
    out
}

/// Go's `hasChDirPrefix`.
fn ch_dir_prefix(value: &str) -> Option<String> {
    if value == "." {
        Some("must not be '.'".into())
    } else if value == ".." {
        Some("must not be '..'".into())
    } else if value.starts_with("..") {
        Some("must not start with '..'".into())
    } else {
        None
    }
}

/// Go's `IsCIdentifier` (sysctl-free uses: `envFrom` prefixes are checked as env names).
pub fn c_identifier(value: &str) -> Vec<String> {
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_');
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_'",
            C_IDENTIFIER_FMT,
            &["my_name", "MY_NAME", "MyName"],
        )]
    }
}

/// Go's `IsValidPortName` (an IANA service name).
pub fn port_name(port: &str) -> Vec<String> {
    let mut out = Vec::new();
    if port.len() > 15 {
        out.push("must be no more than 15 characters".to_string());
    }
    let b = port.as_bytes();
    if !b.iter().all(|&c| alnum_lower(c) || c == b'-') {
        out.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !b.iter().any(u8::is_ascii_lowercase) {
        out.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        out.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        out.push("must not begin or end with a hyphen".into());
    }
    out
}

/// Go's `IsValidPortNum`.
pub fn port_num(port: i32) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".into()]
    }
}

/// Go's `IsValidIP` (v4 or v6).
pub fn ip(value: &str) -> Vec<String> {
    if value.parse::<std::net::IpAddr>().is_ok() {
        Vec::new()
    } else {
        vec!["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into()]
    }
}

/// Go's `IsConfigMapKey` (keys of config maps and secrets, `items[].key`).
pub fn config_map_key(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        out.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    let b = value.as_bytes();
    if b.is_empty()
        || !b
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    {
        out.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            "[-._a-zA-Z0-9]+",
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    out.extend(ch_dir_prefix(value));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        let cases = [
            ("a", true, true),
            ("a-b", true, true),
            ("a.b", false, true),
            ("-a", false, false),
            ("A", false, false),
            ("a_b", false, false),
            ("", false, false),
            ("a..b", false, false),
        ];
        for (s, label, sub) in cases {
            assert_eq!(is_dns1123_label(s), label, "label {s}");
            assert_eq!(dns1123_label(s).is_empty(), label, "label {s}");
            assert_eq!(is_dns1123_subdomain(s), sub, "subdomain {s}");
            assert_eq!(dns1123_subdomain(s).is_empty(), sub, "subdomain {s}");
        }
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(name_is_dns_subdomain("web-", true).is_empty());
        assert!(!name_is_dns_subdomain("web-", false).is_empty());
    }

    #[test]
    fn qualified_names_and_label_values() {
        for ok in ["a", "A.b_c-d", "example.com/Name", "k8s.io/x"] {
            assert!(qualified_name(ok).is_empty(), "{ok}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a/b/c",
            "-a",
            "Example.com/x",
            &"a".repeat(64),
        ] {
            assert!(!qualified_name(bad).is_empty(), "{bad}");
        }
        assert!(label_value("").is_empty());
        assert!(label_value("My_Value.1").is_empty());
        assert!(!label_value("-x").is_empty());
        assert!(!label_value(&"a".repeat(64)).is_empty());
    }

    #[test]
    fn env_and_port_names() {
        assert!(env_var_name("MY_VAR.x-1").is_empty());
        assert!(!env_var_name("1X").is_empty());
        assert!(!env_var_name("A=B").is_empty());
        assert!(!env_var_name("").is_empty());
        assert!(port_name("http").is_empty());
        assert!(!port_name("HTTP").is_empty());
        assert!(!port_name("1234").is_empty());
        assert!(!port_name("a--b").is_empty());
        assert!(!port_name("a-very-long-port-name").is_empty());
        assert!(port_num(1).is_empty() && port_num(65535).is_empty());
        assert!(!port_num(0).is_empty() && !port_num(65536).is_empty());
    }
}
