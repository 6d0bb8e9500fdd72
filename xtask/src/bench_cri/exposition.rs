//! Reading samples out of a Prometheus text exposition (a kubelet's `/metrics`).

/// The samples of the series `name` that carry labels: each line's labels (the text between
/// the braces) and its value; lines whose value is not a number are passed over.
pub(super) fn labelled_samples<'a>(
    text: &'a str,
    name: &'a str,
) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    text.lines().filter_map(move |line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (labels, value) = rest.rsplit_once('}')?;
        Some((labels, value.trim().parse::<f64>().ok()?))
    })
}

/// The value of the label `key` among `labels` (`a="x",b="y"`).
pub(super) fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|l| {
        l.trim()
            .strip_prefix(key)?
            .strip_prefix("=\"")?
            .strip_suffix('"')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_labels_and_their_values() {
        let text =
            "m{a=\"x\",le=\"0.5\"} 3\nm 4\nm{a=\"y\"} nan-ish\nmore{a=\"z\"} 1\nm{le=\"+Inf\"} 7\n";
        let got: Vec<_> = labelled_samples(text, "m").collect();
        assert_eq!(got, [("a=\"x\",le=\"0.5\"", 3.0), ("le=\"+Inf\"", 7.0)]);
        assert_eq!(label(got[0].0, "le"), Some("0.5"));
        assert_eq!(label(got[0].0, "a"), Some("x"));
        assert_eq!(label("ale=\"1\"", "le"), None);
        assert_eq!(label(got[1].0, "a"), None);
    }
}
