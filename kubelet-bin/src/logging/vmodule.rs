//! Verbosity per log callsite: `-v` (`logging.verbosity`) and `--vmodule`
//! (`logging.vmodule`), as klog reads them, mapped onto `tracing` levels.
//!
//! `--vmodule` is klog's `pattern=N[,pattern=N…]`. klog matches a pattern against the Go
//! file's base name without `.go`; kubelet-rs matches it against the last segment of the
//! event's module path (`kubelet_core::pod_workers` → `pod_workers`: the Rust file's name
//! without `.rs`, or a directory module's name). A pattern is a literal or a glob (`*`, `?`,
//! `[…]`, `\` escapes; Go's `filepath.Match`); the first entry that matches wins.
//!
//! A verbosity becomes a maximum level ([`max_level`]): 0–1 info; 2–4 debug for the
//! kubelet-rs crates (info for libraries); 5 and up debug everywhere and trace for the
//! engine and the CRI backend.

use tracing::level_filters::LevelFilter;

use crate::config::logging::{VModuleItem, MAX_VMODULE_ENTRIES};

/// The crates whose debug lines `-v=2`…`4` turns on.
const OURS: &[&str] = &[
    "kubelet_core",
    "kubelet_runtime_cri",
    "kubelet_sources",
    "kubelet_cm",
    "kubelet_bin",
    "kubelet_server",
    "kubelet",
];
/// The crates whose trace lines `-v=5` and up turns on.
const TRACED: &[&str] = &["kubelet_core", "kubelet_runtime_cri"];

fn in_crates(target: &str, crates: &[&str]) -> bool {
    let krate = target.split("::").next().unwrap_or(target);
    crates.contains(&krate)
}

/// The most verbose level shown for `target` at verbosity `v`.
pub fn max_level(v: u32, target: &str) -> LevelFilter {
    match v {
        0..=1 => LevelFilter::INFO,
        2..=4 if in_crates(target, OURS) => LevelFilter::DEBUG,
        2..=4 => LevelFilter::INFO,
        _ if in_crates(target, TRACED) => LevelFilter::TRACE,
        _ => LevelFilter::DEBUG,
    }
}

/// The `--vmodule` flag's syntax as component-base parses it (`VModuleConfiguration`'s
/// pflag): `pattern=N` entries separated by commas, empty entries skipped, N an unsigned
/// 31-bit number; Go's error texts.
pub fn parse(text: &str) -> Result<Vec<VModuleItem>, String> {
    let mut items = Vec::new();
    for entry in text.split(',') {
        if entry.is_empty() {
            continue;
        }
        let parts: Vec<&str> = entry.split('=').collect();
        let (pattern, level) = match parts[..] {
            [p, l] if !p.is_empty() && !l.is_empty() => (p, l),
            _ => return Err(format!("{entry:?} does not have the pattern=N format")),
        };
        let verbosity = parse_uint31(level).map_err(|e| {
            format!("parsing verbosity in {entry:?}: strconv.ParseUint: parsing {level:?}: {e}")
        })?;
        items.push(VModuleItem {
            file_pattern: pattern.to_string(),
            verbosity,
        });
        if items.len() > MAX_VMODULE_ENTRIES {
            return Err(format!("more than {MAX_VMODULE_ENTRIES} entries"));
        }
    }
    Ok(items)
}

/// Go's `strconv.ParseUint(s, 10, 31)`.
fn parse_uint31(s: &str) -> Result<u32, &'static str> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid syntax");
    }
    match s.parse::<u64>() {
        Ok(v) if v <= i32::MAX as u64 => u32::try_from(v).map_err(|_| "value out of range"),
        _ => Err("value out of range"),
    }
}

/// The verbosity for `target`: the first matching `--vmodule` entry's, else `v`. Entries
/// at 0 are ignored, as klog ignores them.
pub fn verbosity_for(v: u32, vmodule: &[VModuleItem], target: &str) -> u32 {
    let name = target.rsplit("::").next().unwrap_or(target);
    vmodule
        .iter()
        .filter(|item| item.verbosity != 0)
        .find(|item| glob_match(&item.file_pattern, name))
        .map_or(v, |item| item.verbosity)
}

/// Go's `filepath.Match` on one path segment: `*` any run of characters, `?` one, `[…]` a
/// class (`^` negates, `a-z` ranges), `\` escapes. A malformed class matches
/// nothing. Linear in the pattern times the name (no backtracking blow-up).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // reach[j]: the pattern so far matches name[..j].
    let mut reach = vec![false; n.len() + 1];
    reach[0] = true;
    let mut i = 0;
    while i < p.len() {
        let mut next = vec![false; n.len() + 1];
        match p[i] {
            '*' => {
                let mut on = false;
                for j in 0..=n.len() {
                    on |= reach[j];
                    next[j] = on;
                }
                i += 1;
            }
            c => {
                let (matcher, width) = match c {
                    '?' => (Single::Any, 1),
                    '[' => match class(&p[i..]) {
                        Some((class, width)) => (Single::Class(class), width),
                        None => return false,
                    },
                    '\\' if i + 1 < p.len() => (Single::Char(p[i + 1]), 2),
                    c => (Single::Char(c), 1),
                };
                for j in 0..n.len() {
                    if reach[j] && matcher.matches(n[j]) {
                        next[j + 1] = true;
                    }
                }
                i += width;
            }
        }
        reach = next;
    }
    reach[n.len()]
}

enum Single {
    Any,
    Char(char),
    Class(Class),
}

impl Single {
    fn matches(&self, c: char) -> bool {
        match self {
            Single::Any => true,
            Single::Char(x) => *x == c,
            Single::Class(class) => class.matches(c),
        }
    }
}

struct Class {
    negated: bool,
    ranges: Vec<(char, char)>,
}

impl Class {
    fn matches(&self, c: char) -> bool {
        self.ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != self.negated
    }
}

/// Parses `[…]` at the start of `p`: the class and how many pattern characters it took.
fn class(p: &[char]) -> Option<(Class, usize)> {
    let mut i = 1;
    let negated = p.get(i) == Some(&'^');
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let c = *p.get(i)?;
        if c == ']' && !first {
            return Some((Class { negated, ranges }, i + 1));
        }
        first = false;
        let lo = if c == '\\' {
            i += 1;
            *p.get(i)?
        } else {
            c
        };
        i += 1;
        let hi = if p.get(i) == Some(&'-') && p.get(i + 1).is_some_and(|c| *c != ']') {
            let mut hi = *p.get(i + 1)?;
            i += 2;
            if hi == '\\' {
                hi = *p.get(i)?;
                i += 1;
            }
            hi
        } else {
            lo
        };
        if lo > hi {
            return None;
        }
        ranges.push((lo, hi));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn globs_match_as_filepath_match() {
        let cases = [
            ("pod_workers", "pod_workers", true),
            ("pod_*", "pod_workers", true),
            ("*workers", "pod_workers", true),
            ("pod_?orkers", "pod_workers", true),
            ("pod", "pod_workers", false),
            ("*", "", true),
            ("", "", true),
            ("[ps]od*", "pod_workers", true),
            ("[^p]od*", "pod_workers", false),
            // `!` is no negation in filepath.Match: a member of the class.
            ("[!p]od*", "pod_workers", true),
            ("[!p]od*", "!od", true),
            ("[!p]od*", "rod", false),
            ("[^a-o]od*", "pod_workers", true),
            ("[a-c]", "b", true),
            ("[a-c]", "d", false),
            ("\\*", "*", true),
            ("\\*", "x", false),
            ("[", "x", false),
            ("[z-a]", "x", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(glob_match(pattern, name), want, "{pattern:?} {name:?}");
        }
    }

    #[test]
    fn vmodule_parses_as_klog_and_the_first_match_wins() {
        let items = parse("pod_workers=4,,prober*=2,stats=0,*=1").unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(verbosity_for(0, &items, "kubelet_core::pod_workers"), 4);
        assert_eq!(verbosity_for(0, &items, "kubelet_core::prober_manager"), 2);
        assert_eq!(
            verbosity_for(0, &items, "kubelet_cm::stats"),
            1,
            "stats=0 is ignored: the next match applies"
        );
        assert_eq!(verbosity_for(6, &[], "kubelet_cm::stats"), 6);
        assert!(parse("").unwrap().is_empty());
        for (bad, want) in [
            ("pod_workers", "\"pod_workers\" does not have the pattern=N format"),
            ("=3", "\"=3\" does not have the pattern=N format"),
            ("a=1=2", "\"a=1=2\" does not have the pattern=N format"),
            (
                "a=x",
                "parsing verbosity in \"a=x\": strconv.ParseUint: parsing \"x\": invalid syntax",
            ),
            (
                "a=-1",
                "parsing verbosity in \"a=-1\": strconv.ParseUint: parsing \"-1\": invalid syntax",
            ),
            (
                "a=2147483648",
                "parsing verbosity in \"a=2147483648\": strconv.ParseUint: parsing \"2147483648\": value out of range",
            ),
        ] {
            assert_eq!(parse(bad).unwrap_err(), want, "{bad}");
        }
    }

    #[test]
    fn verbosity_maps_onto_levels_as_before() {
        assert_eq!(max_level(0, "kubelet_core::x"), LevelFilter::INFO);
        assert_eq!(max_level(4, "kubelet_core::x"), LevelFilter::DEBUG);
        assert_eq!(max_level(4, "h2::codec"), LevelFilter::INFO);
        assert_eq!(max_level(8, "h2::codec"), LevelFilter::DEBUG);
        assert_eq!(max_level(8, "kubelet_runtime_cri"), LevelFilter::TRACE);
        assert_eq!(max_level(8, "kubelet_cm::stats"), LevelFilter::DEBUG);
    }

    proptest! {
        #[test]
        fn a_literal_matches_itself_and_a_star_anything(name in "[a-z_]{0,20}") {
            prop_assert!(glob_match(&name, &name));
            prop_assert!(glob_match("*", &name));
        }

        #[test]
        fn globs_never_panic(pattern in "[a-c*?\\[\\]\\\\^!-]{0,12}", name in "[a-c-]{0,12}") {
            let _ = glob_match(&pattern, &name);
        }
    }
}
