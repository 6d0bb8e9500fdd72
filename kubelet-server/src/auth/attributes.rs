//! Request → authorization attributes, as Go's `NewNodeAuthorizerAttributesGetter`, with
//! the fine-grained kubelet authorization of current Go kubelets (`KubeletFineGrainedAuthz`):
//! `/pods` and `/runningpods/` are first asked as `nodes/pods`, `/healthz*` as
//! `nodes/healthz`, `/configz` as `nodes/configz`, each falling back to `nodes/proxy`; a
//! request is allowed when any of its attributes is ([`request_attributes_list`]).

use super::UserInfo;

/// What a request asks to do, in the terms of a SubjectAccessReview: `verb` on
/// `nodes/<subresource>` named after this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// The user.
    pub user: UserInfo,
    /// `get`, `create`, `update`, `patch`, `delete`.
    pub verb: String,
    /// Always `nodes`.
    pub resource: String,
    /// `proxy`, `stats`, `metrics`, `log`, `spec`, `healthz`.
    pub subresource: String,
    /// The node name.
    pub name: String,
    /// The request path.
    pub path: String,
}

/// The verb for an HTTP method (Go's mapping); an upgrade (WebSocket or SPDY) is a `create`
/// whatever the method — Go asks this of the streaming endpoints, the only ones that accept
/// upgrades; asking it of every upgrade leaves no path spelling that turns an exec into a `get`.
pub fn verb_for(method: &str, upgrade: bool) -> &'static str {
    if upgrade {
        return "create";
    }
    match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// Go's `isSubpath`: `path` is `prefix` or below it.
fn is_subpath(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The subresource of `nodes` a path maps to.
fn subresource_for(path: &str) -> &'static str {
    if is_subpath(path, "/stats/") {
        "stats"
    } else if is_subpath(path, "/metrics") {
        "metrics"
    } else if is_subpath(path, "/logs/") {
        "log"
    } else if is_subpath(path, "/spec/") {
        "spec"
    } else if is_subpath(path, "/healthz") {
        "healthz"
    } else {
        "proxy"
    }
}

/// The fine-grained subresource of a path, asked before the coarse one.
fn fine_grained_for(path: &str) -> Option<&'static str> {
    if is_subpath(path, "/pods") || is_subpath(path, "/runningpods/") {
        Some("pods")
    } else if is_subpath(path, "/healthz") {
        Some("healthz")
    } else if is_subpath(path, "/configz") {
        Some("configz")
    } else {
        None
    }
}

/// Every set of attributes a request may be allowed by, in the order they are asked (Go's
/// `GetRequestAttributes` with fine-grained authorization): the fine-grained subresource,
/// then `proxy`; or the one subresource of the path.
pub fn request_attributes_list(
    user: UserInfo,
    node_name: &str,
    method: &str,
    path: &str,
    upgrade: bool,
) -> Vec<Attributes> {
    let base = request_attributes(user, node_name, method, path, upgrade);
    match fine_grained_for(path) {
        Some(fine) => {
            let fallback = Attributes {
                subresource: "proxy".into(),
                ..base.clone()
            };
            vec![
                Attributes {
                    subresource: fine.into(),
                    ..base
                },
                fallback,
            ]
        }
        None => vec![base],
    }
}

/// The attributes of a request by `user` on node `node_name` (the coarse mapping; see
/// [`request_attributes_list`] for what the server asks).
pub fn request_attributes(
    user: UserInfo,
    node_name: &str,
    method: &str,
    path: &str,
    upgrade: bool,
) -> Attributes {
    Attributes {
        user,
        verb: verb_for(method, upgrade).to_string(),
        resource: "nodes".into(),
        subresource: subresource_for(path).to_string(),
        name: node_name.to_string(),
        path: path.to_string(),
    }
}

/// Whether a request path is in canonical form: it starts with `/` and has no empty, `.` or
/// `..` segment (a trailing `/` is allowed). Anything else is refused before authorization, so
/// the path that is authorized is the path that is served (`//exec/…` must not be authorized
/// as something else than `/exec/…`).
pub fn is_canonical_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    rest.is_empty()
        || rest.split('/').all(|seg| {
            let lower = seg.to_ascii_lowercase();
            !seg.is_empty() && seg != "." && seg != ".." && !lower.contains("%2f")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_table() {
        let cases = [
            ("GET", "/stats/summary", false, "get", "stats"),
            ("GET", "/stats", false, "get", "stats"),
            ("GET", "/statsx", false, "get", "proxy"),
            ("GET", "/metrics", false, "get", "metrics"),
            ("GET", "/metrics/resource", false, "get", "metrics"),
            ("GET", "/metrics/cadvisor", false, "get", "metrics"),
            ("GET", "/logs/", false, "get", "log"),
            ("GET", "/logs/syslog", false, "get", "log"),
            ("GET", "/spec/", false, "get", "spec"),
            ("GET", "/healthz", false, "get", "healthz"),
            ("GET", "/healthz/syncloop", false, "get", "healthz"),
            ("GET", "/pods", false, "get", "proxy"),
            ("GET", "/containerLogs/ns/p/c", false, "get", "proxy"),
            ("GET", "/configz", false, "get", "proxy"),
            ("POST", "/exec/ns/p/c", false, "create", "proxy"),
            ("GET", "/exec/ns/p/c", true, "create", "proxy"),
            ("GET", "/attach/ns/p/c", true, "create", "proxy"),
            ("GET", "/portForward/ns/p", true, "create", "proxy"),
            ("GET", "/run/ns/p/c", true, "create", "proxy"),
            ("GET", "/exec/ns/p/c", false, "get", "proxy"),
            ("GET", "/pods", true, "create", "proxy"),
            ("PUT", "/pods", false, "update", "proxy"),
            ("PATCH", "/pods", false, "patch", "proxy"),
            ("DELETE", "/pods", false, "delete", "proxy"),
            ("HEAD", "/metrics", false, "get", "metrics"),
        ];
        for (method, path, upgrade, verb, sub) in cases {
            let a = request_attributes(UserInfo::anonymous(), "n1", method, path, upgrade);
            assert_eq!(
                (a.verb.as_str(), a.subresource.as_str()),
                (verb, sub),
                "{method} {path} upgrade={upgrade}"
            );
            assert_eq!(a.resource, "nodes");
            assert_eq!(a.name, "n1");
        }
    }

    #[test]
    fn fine_grained_table() {
        let cases: [(&str, &[&str]); 10] = [
            ("/pods", &["pods", "proxy"]),
            ("/pods/", &["pods", "proxy"]),
            ("/runningpods/", &["pods", "proxy"]),
            ("/healthz", &["healthz", "proxy"]),
            ("/healthz/syncloop", &["healthz", "proxy"]),
            ("/configz", &["configz", "proxy"]),
            ("/podsx", &["proxy"]),
            ("/stats/summary", &["stats"]),
            ("/metrics/cadvisor", &["metrics"]),
            ("/exec/ns/p/c", &["proxy"]),
        ];
        for (path, want) in cases {
            let got: Vec<String> =
                request_attributes_list(UserInfo::anonymous(), "n1", "GET", path, false)
                    .into_iter()
                    .map(|a| a.subresource)
                    .collect();
            assert_eq!(got, want, "{path}");
        }
    }

    #[test]
    fn only_canonical_paths_pass() {
        let cases = [
            ("/", true),
            ("/pods", true),
            ("/logs/", true),
            ("/exec/ns/pod/c", true),
            ("//exec/ns/pod/c", false),
            ("/exec//ns/pod/c", false),
            ("/./exec/ns/pod/c", false),
            ("/logs/../exec", false),
            ("/logs/a%2Fb", false),
            ("/logs/a%2fb", false),
            ("exec", false),
        ];
        for (path, want) in cases {
            assert_eq!(is_canonical_path(path), want, "{path}");
        }
    }

    #[test]
    fn every_upgrade_is_a_create() {
        assert_eq!(verb_for("GET", true), "create");
        assert_eq!(verb_for("GET", false), "get");
        assert_eq!(verb_for("POST", false), "create");
    }
}
