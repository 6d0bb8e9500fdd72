//! `$(VAR)` expansion (Kubernetes' `expansion.Expand`): `$(NAME)` is replaced by the value of
//! `NAME` when it is defined and left as written when it is not; `$$` is an escaped `$`; any
//! other `$` is kept.

/// Expands `$(VAR)` references in `input` with `lookup`.
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    let mut literal_start = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && i + 1 < bytes.len() {
            match bytes[i + 1] {
                b'$' => {
                    out.push_str(&input[literal_start..i]);
                    out.push('$');
                    i += 2;
                    literal_start = i;
                    continue;
                }
                b'(' => {
                    if let Some(close) = input[i + 2..].find(')') {
                        let name = &input[i + 2..i + 2 + close];
                        out.push_str(&input[literal_start..i]);
                        match lookup(name) {
                            Some(v) => out.push_str(&v),
                            None => out.push_str(&input[i..i + 3 + close]),
                        }
                        i += 3 + close;
                        literal_start = i;
                        continue;
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    out.push_str(&input[literal_start..]);
    out
}
