//! Request → authorization attributes, as Go's `NewNodeAuthorizerAttributesGetter`.

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

/// Paths of the streaming endpoints, whose upgrade requests need `create`.
const STREAMING_PREFIXES: [&str; 4] = ["/exec", "/attach", "/portForward", "/run"];

/// The verb for an HTTP method (Go's mapping); an upgrade (WebSocket or SPDY) of a
/// streaming endpoint is a `create` whatever the method.
pub fn verb_for(method: &str, path: &str, upgrade: bool) -> &'static str {
    if upgrade && STREAMING_PREFIXES.iter().any(|p| is_subpath(path, p)) {
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

/// The attributes of a request by `user` on node `node_name`.
pub fn request_attributes(
    user: UserInfo,
    node_name: &str,
    method: &str,
    path: &str,
    upgrade: bool,
) -> Attributes {
    Attributes {
        user,
        verb: verb_for(method, path, upgrade).to_string(),
        resource: "nodes".into(),
        subresource: subresource_for(path).to_string(),
        name: node_name.to_string(),
        path: path.to_string(),
    }
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
            ("GET", "/pods", true, "get", "proxy"),
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
}
