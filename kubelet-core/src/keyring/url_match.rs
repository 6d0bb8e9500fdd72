//! Go's registry URL matching (`credentialprovider.URLsMatch`): a credential's registry
//! pattern against an image's repository, both schemeless URLs.
//!
//! - the ports must be equal (no port matches only no port);
//! - the host names must have the same number of dot-separated parts, each part matched as a
//!   glob (`*`, `?`, `[a-z]`, as Go's `filepath.Match`), so `*.example.io` matches
//!   `registry.example.io` but not `example.io` nor `a.b.example.io`;
//! - the pattern's path must be a prefix of the image's path (a plain string prefix:
//!   `host/team` matches `host/team/app` and also `host/teamx`).

/// A schemeless URL split as Go's `url.Parse("https://" + s)` does (host with port; path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemelessUrl {
    /// `host[:port]` (user info removed).
    pub host: String,
    /// The path, starting with `/` (empty when there is none).
    pub path: String,
}

/// Why a URL or pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// The port is not a number.
    #[error("{url:?}: invalid port {port:?} after host")]
    InvalidPort {
        /// The URL.
        url: String,
        /// The port part.
        port: String,
    },
    /// A host part is not a valid glob pattern (Go's `filepath.ErrBadPattern`).
    #[error("{pattern:?}: syntax error in pattern")]
    BadPattern {
        /// The pattern.
        pattern: String,
    },
}

/// Parses `s` as Go's `ParseSchemelessURL` does.
pub(crate) fn parse_schemeless(s: &str) -> Result<SchemelessUrl, UrlError> {
    // Up to the query or fragment.
    let s = s.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match s.find('/') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let host = authority.rsplit('@').next().unwrap_or_default();
    // Go's validOptionalPort: after the host (or after "]" for IPv6) a port is ":" digits*.
    let after_host = match host.rfind(']') {
        Some(i) if host.starts_with('[') => &host[i + 1..],
        _ => host,
    };
    if let Some(i) = after_host.rfind(':') {
        let port = &after_host[i + 1..];
        if !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(UrlError::InvalidPort {
                url: s.to_string(),
                port: format!(":{port}"),
            });
        }
    }
    Ok(SchemelessUrl {
        host: host.to_string(),
        path: path.to_string(),
    })
}

/// Go's `SplitURL`: the host's dot-separated parts and the port ("" when none or when the
/// host cannot be split, as `net.SplitHostPort` fails).
fn split_host(host: &str) -> (Vec<&str>, &str) {
    let (name, port) = split_host_port(host).unwrap_or((host, ""));
    (name.split('.').collect(), port)
}

/// `net.SplitHostPort`: `host:port` or `[v6]:port`; `None` when there is no port.
fn split_host_port(hostport: &str) -> Option<(&str, &str)> {
    if let Some(rest) = hostport.strip_prefix('[') {
        let end = rest.find(']')?;
        let port = rest[end + 1..].strip_prefix(':')?;
        return Some((&rest[..end], port));
    }
    let i = hostport.rfind(':')?;
    if hostport[..i].contains(':') {
        return None;
    }
    Some((&hostport[..i], &hostport[i + 1..]))
}

/// Whether the registry pattern `glob` matches the repository `target` (both schemeless).
/// See the module docs.
pub fn urls_match(glob: &str, target: &str) -> Result<bool, UrlError> {
    let glob = parse_schemeless(glob)?;
    let target = parse_schemeless(target)?;
    let (glob_parts, glob_port) = split_host(&glob.host);
    let (target_parts, target_port) = split_host(&target.host);
    if glob_port != target_port || glob_parts.len() != target_parts.len() {
        return Ok(false);
    }
    if !target.path.starts_with(&glob.path) {
        return Ok(false);
    }
    for (g, t) in glob_parts.iter().zip(&target_parts) {
        if !glob_match(g, t).ok_or_else(|| UrlError::BadPattern {
            pattern: (*g).to_string(),
        })? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Go's `filepath.Match` on one host part (no separators in it): `*` any run, `?` one
/// character, `[...]` a class (`^` negates, `a-z` ranges), `\` escapes. `None` for a bad
/// pattern.
pub(crate) fn glob_match(pattern: &str, name: &str) -> Option<bool> {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // A bad pattern is bad wherever the match ends: check it whole first (as Go reports
    // ErrBadPattern for a malformed class even after a mismatch).
    validate(&p)?;
    Some(match_from(&p, &n))
}

fn validate(p: &[char]) -> Option<()> {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => {
                p.get(i + 1)?;
                i += 2;
            }
            '[' => i = class_end(p, i)?,
            _ => i += 1,
        }
    }
    Some(())
}

/// The index after the class starting at `p[start] == '['`; `None` when malformed.
fn class_end(p: &[char], start: usize) -> Option<usize> {
    let mut i = start + 1;
    if p.get(i) == Some(&'^') {
        i += 1;
    }
    let mut first = true;
    loop {
        let c = *p.get(i)?;
        if c == ']' && !first {
            return Some(i + 1);
        }
        if c == ']' {
            // Go: an empty class is a bad pattern.
            return None;
        }
        first = false;
        i = class_char_end(p, i)?;
        if p.get(i) == Some(&'-') {
            i = class_char_end(p, i + 1)?;
        }
    }
}

fn class_char_end(p: &[char], i: usize) -> Option<usize> {
    match *p.get(i)? {
        '\\' => p.get(i + 1).map(|_| i + 2),
        '-' | ']' => None,
        _ => Some(i + 1),
    }
}

fn class_char(p: &[char], i: usize) -> (char, usize) {
    if p[i] == '\\' {
        (p[i + 1], i + 2)
    } else {
        (p[i], i + 1)
    }
}

/// Whether the class at `p[start]` matches `c`; with the index after the class.
fn match_class(p: &[char], start: usize, c: char) -> (bool, usize) {
    let mut i = start + 1;
    let negated = p.get(i) == Some(&'^');
    if negated {
        i += 1;
    }
    let mut matched = false;
    while p[i] != ']' {
        let (lo, next) = class_char(p, i);
        i = next;
        let mut hi = lo;
        if p[i] == '-' {
            let (h, next) = class_char(p, i + 1);
            hi = h;
            i = next;
        }
        if lo <= c && c <= hi {
            matched = true;
        }
    }
    (matched != negated, i + 1)
}

fn match_from(p: &[char], n: &[char]) -> bool {
    let Some((&first, _)) = p.split_first() else {
        return n.is_empty();
    };
    match first {
        '*' => (0..=n.len()).any(|k| match_from(&p[1..], &n[k..])),
        '?' => !n.is_empty() && match_from(&p[1..], &n[1..]),
        '[' => {
            let Some((&c, rest)) = n.split_first() else {
                return false;
            };
            let (ok, next) = match_class(p, 0, c);
            ok && match_from(&p[next..], rest)
        }
        '\\' => n.first() == p.get(1) && match_from(&p[2..], &n[1..]),
        lit => n.first() == Some(&lit) && match_from(&p[1..], &n[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `TestURLsMatch`.
    #[test]
    fn go_urls_match_table() {
        for (glob, target, want) in [
            // match when there is no path component
            ("*.kubernetes.io", "prefix.kubernetes.io", true),
            ("prefix.*.io", "prefix.kubernetes.io", true),
            ("prefix.kubernetes.*", "prefix.kubernetes.io", true),
            ("*-good.kubernetes.io", "prefix-good.kubernetes.io", true),
            // match with path components
            ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true),
            ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true),
            // match with path components and ports
            (
                "*.kubernetes.io:1111/blah",
                "prefix.kubernetes.io:1111/blah",
                true,
            ),
            (
                "prefix.*.io:1111/foo",
                "prefix.kubernetes.io:1111/foo/bar",
                true,
            ),
            // no match when number of parts mismatch
            ("*.kubernetes.io", "kubernetes.io", false),
            ("*.*.kubernetes.io", "prefix.kubernetes.io", false),
            ("*.*.kubernetes.io", "kubernetes.io", false),
            // no match when some parts mismatch
            ("kubernetes.io", "kubernetes.com", false),
            ("k*.io", "quay.io", false),
            // no match when ports mismatch
            (
                "*.kubernetes.io:1234/blah",
                "prefix.kubernetes.io:1111/blah",
                false,
            ),
            (
                "prefix.*.io/foo",
                "prefix.kubernetes.io:1111/foo/bar",
                false,
            ),
        ] {
            assert_eq!(
                urls_match(glob, target).unwrap_or(false),
                want,
                "{glob} vs {target}"
            );
        }
    }

    #[test]
    fn ip_hosts_ports_and_bad_input() {
        assert_eq!(urls_match("127.0.0.1:5443", "127.0.0.1:5443/a/b"), Ok(true));
        assert_eq!(urls_match("127.0.0.1:5443", "127.0.0.1/a/b"), Ok(false));
        assert_eq!(urls_match("127.0.0.1", "127.0.0.1:5443/a"), Ok(false));
        assert_eq!(urls_match("[::1]:5000", "[::1]:5000/x"), Ok(true));
        assert!(matches!(
            urls_match("host:port", "host:1/x"),
            Err(UrlError::InvalidPort { .. })
        ));
        assert!(matches!(
            urls_match("[]x.io", "a.io/x"),
            Err(UrlError::BadPattern { .. })
        ));
        // User info is not part of the host.
        assert_eq!(urls_match("user@reg.io", "reg.io/x"), Ok(true));
    }

    #[test]
    fn glob_like_go_filepath_match() {
        for (p, n, want) in [
            ("abc", "abc", Some(true)),
            ("*", "abc", Some(true)),
            ("*c", "abc", Some(true)),
            ("a*", "a", Some(true)),
            ("a*/b", "abc/b", Some(true)),
            ("a?c", "abc", Some(true)),
            ("a[b-d]c", "acc", Some(true)),
            ("a[^b-d]c", "acc", Some(false)),
            ("a[^b-d]c", "axc", Some(true)),
            ("a\\*c", "a*c", Some(true)),
            ("a\\*c", "abc", Some(false)),
            ("[", "a", None),
            ("[]", "a", None),
            ("a[", "x", None),
            ("\\", "a", None),
            ("[a-]", "a", None),
        ] {
            assert_eq!(glob_match(p, n), want, "{p} vs {n}");
        }
    }
}
