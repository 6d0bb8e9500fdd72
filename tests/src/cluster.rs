//! The real control plane for cluster tests: etcd, kube-apiserver, kube-controller-manager and
//! kube-scheduler v1.20.2 on 127.0.0.1, run by `scripts/control-plane.sh`.
//!
//! [`ControlPlane::ensure`] starts it through the script when it is not running (once per
//! machine: every test binary may call it at once, the script serializes them with a lock file
//! and leaves a running control plane alone) and reads the paths the script prints with `env`.
//! The first start on a machine builds the binaries (several minutes); later ones take seconds.
//!
//! Identities: the admin (`system:masters`), one node identity per node name
//! ([`ControlPlane::node_kubeconfig`]: a client cert `CN=system:node:<name>`,
//! `O=system:nodes`, so tests that each use their own node name run in parallel), and for the
//! kubelet's HTTPS server a serving cert per node signed by the kubelet CA that the apiserver
//! trusts (`--kubelet-certificate-authority`). The apiserver reaches kubelets with the client
//! cert [`ControlPlane::apiserver_kubelet_client_cert_path`] (`O=system:masters`), signed by the
//! cluster CA ([`ControlPlane::client_ca_path`]), which is what a kubelet's x509 authentication
//! must trust.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kubelet_tests::cluster::ClusterError> {
//! use kubelet_tests::cluster::ControlPlane;
//! let cp = ControlPlane::ensure().await?;
//! let admin = cp.admin_client().await?;
//! let node_kubeconfig = cp.node_kubeconfig("my-test-node").await?;
//! let out = cp.kubectl(&["get", "nodes"]).await?;
//! # let _ = (admin, node_kubeconfig, out);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::process::Command;
use tokio::sync::OnceCell;

/// Errors of the control-plane harness.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A command (the script, kubectl) could not be started.
    #[error("starting {command}: {error}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why it could not start.
        error: std::io::Error,
    },
    /// A command ran and failed.
    #[error("{command} failed ({status}): {stderr}")]
    CommandFailed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// The script's `env` output lacks a variable.
    #[error("the control plane's env output has no {name}")]
    MissingEnv {
        /// The variable.
        name: String,
    },
    /// A kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {}", kubelet_core::display_chain(.error))]
    Kubeconfig {
        /// The kubeconfig file.
        path: PathBuf,
        /// What went wrong.
        error: kube::config::KubeconfigError,
    },
    /// A client could not be built from a kubeconfig.
    #[error("client from {path}: {}", kubelet_core::display_chain(.error))]
    Client {
        /// The kubeconfig file.
        path: PathBuf,
        /// What went wrong.
        error: kube::Error,
    },
    /// A node name that is not a DNS subdomain.
    #[error("invalid node name {name:?}")]
    InvalidNodeName {
        /// The rejected name.
        name: String,
    },
}

/// The control plane's script, in the running checkout ([`crate::scripts`]).
pub fn script_path() -> PathBuf {
    crate::scripts::script("control-plane.sh")
}

/// A running control plane: paths and clients. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ControlPlane {
    env: BTreeMap<String, String>,
    /// The script's environment for this instance (empty: the shared default one).
    script_env: Vec<(String, String)>,
    admin_kubeconfig: PathBuf,
    node_kubeconfig: PathBuf,
    node_name: String,
    apiserver_url: String,
    cluster_ca: PathBuf,
    kubelet_ca: PathBuf,
    kubelet_cert: PathBuf,
    kubelet_key: PathBuf,
    audit_log: PathBuf,
}

static ENSURED: OnceCell<ControlPlane> = OnceCell::const_new();
static JOIN: OnceCell<ControlPlane> = OnceCell::const_new();

/// The control plane of the join tests (TLS bootstrap, rotation, serving certificates): an
/// instance of its own beside the shared one (its own state dir, ports and lock), whose
/// controller-manager signs kubelet certificates for 8 minutes (`--cluster-signing-duration`;
/// v1.20 backdates them 5 minutes, so they expire 3 minutes after issuance and rotate after
/// 0.6–2.2 minutes). Started by the first test that needs it and left running, like the
/// shared one; `scripts/test.sh` stops it at the end when it started it.
pub const JOIN_INSTANCE_ENV: &[(&str, &str)] = &[
    (
        "KUBELET_RS_CP_DIR",
        "/var/lib/kubelet-rs/join/control-plane",
    ),
    (
        "KUBELET_RS_CP_LOCK",
        "/var/lib/kubelet-rs/join/control-plane.lock",
    ),
    ("KUBELET_RS_ETCD_PORT", "32379"),
    ("KUBELET_RS_ETCD_PEER_PORT", "32380"),
    ("KUBELET_RS_APISERVER_PORT", "36443"),
    ("KUBELET_RS_CM_PORT", "30257"),
    ("KUBELET_RS_SCHED_PORT", "30259"),
    ("KUBELET_RS_NODE_NAME", "kubelet-rs-join"),
    ("KUBELET_RS_CM_EXTRA_FLAGS", "--cluster-signing-duration=8m"),
];

/// The control plane of the ephemeral containers test: an instance of its own (state dir,
/// ports, lock) whose v1.20 apiserver has the alpha `EphemeralContainers` gate, which the
/// `pods/ephemeralcontainers` subresource needs (the shared instance runs without it). The
/// test starts it ([`ControlPlane::start_instance`]) and stops it when done.
pub const EPHEMERAL_INSTANCE_ENV: &[(&str, &str)] = &[
    (
        "KUBELET_RS_CP_DIR",
        "/var/lib/kubelet-rs/ephemeral/control-plane",
    ),
    (
        "KUBELET_RS_CP_LOCK",
        "/var/lib/kubelet-rs/ephemeral/control-plane.lock",
    ),
    ("KUBELET_RS_ETCD_PORT", "42379"),
    ("KUBELET_RS_ETCD_PEER_PORT", "42380"),
    ("KUBELET_RS_APISERVER_PORT", "46443"),
    ("KUBELET_RS_CM_PORT", "40257"),
    ("KUBELET_RS_SCHED_PORT", "40259"),
    ("KUBELET_RS_NODE_NAME", "kubelet-rs-ephemeral"),
    (
        "KUBELET_RS_APISERVER_EXTRA_FLAGS",
        "--feature-gates=EphemeralContainers=true",
    ),
];

/// Closes every descriptor above 2 the shell inherited, then runs the script (`$0`).
const CLOSE_INHERITED_FDS: &str = r#"for fd in /proc/$$/fd/*; do fd=${fd##*/}; if [ "$fd" -gt 2 ] && [ -e "/proc/$$/fd/$fd" ]; then eval "exec $fd>&-"; fi; done; exec bash "$0" "$@""#;

/// A `bash` command running `script` (arguments to follow) with every inherited descriptor
/// above 2 closed first: the daemons a script starts (etcd, the apiserver, the registry) must
/// not keep the lock of the `flock LOCK cargo test ...` running the tests, which they would
/// otherwise hold for as long as they run.
pub fn script_command(script: &std::path::Path) -> Command {
    let mut command = Command::new("bash");
    command.arg("-c").arg(CLOSE_INHERITED_FDS).arg(script);
    command
}

/// [`script_command`] for synchronous callers (tests that restart a daemon in place).
pub fn blocking_script_command(script: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new("bash");
    command.arg("-c").arg(CLOSE_INHERITED_FDS).arg(script);
    command
}

/// Runs the control-plane script with `args`; its standard output on success.
async fn run_script(args: &[&str]) -> Result<String, ClusterError> {
    run_script_env(args, &[]).await
}

/// [`run_script`] for the instance of `env`.
async fn run_script_env(args: &[&str], env: &[(String, String)]) -> Result<String, ClusterError> {
    let path = script_path();
    let command = format!("{} {}", path.display(), args.join(" "));
    let out = script_command(&path)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|source| ClusterError::Spawn {
            command: command.clone(),
            error: source,
        })?;
    if !out.status.success() {
        return Err(ClusterError::CommandFailed {
            command,
            status: out.status.to_string(),
            stderr: tail(&out.stderr, 4000),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn tail(bytes: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    let start = s.len().saturating_sub(max);
    // Stay on a char boundary.
    let start = (start..=s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(s.len());
    s[start..].to_string()
}

/// Parses `export NAME=VALUE` lines.
fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Whether `name` is a DNS subdomain (what the script accepts as a node name).
fn valid_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

impl ControlPlane {
    /// The running control plane, started through the script when it is not running (the
    /// first start on a machine also builds the binaries). Once per test process; safe when
    /// several processes call it at once.
    pub async fn ensure() -> Result<ControlPlane, ClusterError> {
        ENSURED
            .get_or_try_init(|| async {
                if run_script(&["status"]).await.is_err() {
                    run_script(&["up"]).await?;
                }
                ControlPlane::from_env(parse_env(&run_script(&["env"]).await?))
            })
            .await
            .cloned()
    }

    /// [`ControlPlane::ensure`] for a test that needs it: `Ok(None)` (after a `SKIPPED` line
    /// naming `test`) when it cannot be had outside CI; under CI (`CI` set) the error, which
    /// fails the test.
    pub async fn ensure_or_skip(test: &str) -> Result<Option<ControlPlane>, ClusterError> {
        match ControlPlane::ensure().await {
            Ok(cp) => Ok(Some(cp)),
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("SKIPPED {test}: control plane unavailable: {e}");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The join tests' control plane ([`JOIN_INSTANCE_ENV`]), started when not running.
    pub async fn ensure_join() -> Result<ControlPlane, ClusterError> {
        JOIN.get_or_try_init(|| ControlPlane::start_instance(JOIN_INSTANCE_ENV))
            .await
            .cloned()
    }

    /// The control plane instance of `env` (the script's variables: its own state dir, ports
    /// and lock), started through the script when it is not running. The caller stops it with
    /// [`ControlPlane::stop_instance`].
    pub async fn start_instance(env: &[(&str, &str)]) -> Result<ControlPlane, ClusterError> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if run_script_env(&["status"], &env).await.is_err() {
            run_script_env(&["up"], &env).await?;
        }
        let mut cp = ControlPlane::from_env(parse_env(&run_script_env(&["env"], &env).await?))?;
        cp.script_env = env;
        Ok(cp)
    }

    /// Stops an instance started by [`ControlPlane::start_instance`] and removes its state
    /// (the script's `down`); never the shared one.
    pub async fn stop_instance(&self) -> Result<(), ClusterError> {
        if self.script_env.is_empty() {
            return Ok(());
        }
        run_script_env(&["down"], &self.script_env)
            .await
            .map(|_| ())
    }

    /// A new bootstrap token (kubeadm's format, valid `ttl`, e.g. "1h") and the path of a
    /// bootstrap kubeconfig using it.
    pub async fn bootstrap_kubeconfig(&self, ttl: &str) -> Result<PathBuf, ClusterError> {
        let out = run_script_env(&["bootstrap-token", ttl], &self.script_env).await?;
        Ok(PathBuf::from(out.trim()))
    }

    fn from_env(env: BTreeMap<String, String>) -> Result<ControlPlane, ClusterError> {
        let get = |name: &str| {
            env.get(name)
                .cloned()
                .ok_or_else(|| ClusterError::MissingEnv {
                    name: name.to_string(),
                })
        };
        Ok(ControlPlane {
            admin_kubeconfig: get("KUBELET_RS_ADMIN_KUBECONFIG")?.into(),
            node_kubeconfig: get("KUBELET_RS_NODE_KUBECONFIG")?.into(),
            node_name: get("KUBELET_RS_NODE_NAME")?,
            apiserver_url: get("KUBELET_RS_APISERVER_URL")?,
            cluster_ca: get("KUBELET_RS_CLUSTER_CA")?.into(),
            kubelet_ca: get("KUBELET_RS_KUBELET_CA")?.into(),
            kubelet_cert: get("KUBELET_RS_KUBELET_TLS_CERT")?.into(),
            kubelet_key: get("KUBELET_RS_KUBELET_TLS_KEY")?.into(),
            audit_log: get("KUBELET_RS_AUDIT_LOG")?.into(),
            env,
            script_env: Vec::new(),
        })
    }

    /// The apiserver's URL (`https://127.0.0.1:6443`).
    pub fn apiserver_url(&self) -> &str {
        &self.apiserver_url
    }

    /// The admin kubeconfig (`system:masters`).
    pub fn admin_kubeconfig_path(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The kubeconfig of the default node identity ([`ControlPlane::default_node_name`]).
    pub fn node_kubeconfig_path(&self) -> &Path {
        &self.node_kubeconfig
    }

    /// The default node name (`$KUBELET_RS_NODE_NAME`, `kubelet-rs-node`).
    pub fn default_node_name(&self) -> &str {
        &self.node_name
    }

    /// The cluster CA: signs the apiserver's serving cert and every client cert (admin,
    /// nodes, the apiserver's kubelet client cert).
    pub fn ca_cert_path(&self) -> &Path {
        &self.cluster_ca
    }

    /// The CA a kubelet's x509 client authentication trusts (`authentication.x509.clientCAFile`):
    /// the cluster CA.
    pub fn client_ca_path(&self) -> &Path {
        &self.cluster_ca
    }

    /// The CA that signs kubelet serving certs; the apiserver verifies kubelets with it
    /// (`--kubelet-certificate-authority`).
    pub fn kubelet_ca_path(&self) -> &Path {
        &self.kubelet_ca
    }

    /// The default node's kubelet serving cert (SANs: the node name, the host name, localhost,
    /// 127.0.0.1, ::1).
    pub fn kubelet_serving_cert_path(&self) -> &Path {
        &self.kubelet_cert
    }

    /// The key of [`ControlPlane::kubelet_serving_cert_path`].
    pub fn kubelet_serving_key_path(&self) -> &Path {
        &self.kubelet_key
    }

    /// The directory of the control plane's certificates and keys.
    pub fn pki_dir(&self) -> &Path {
        self.cluster_ca.parent().unwrap_or(Path::new("/"))
    }

    /// The client cert the apiserver presents to kubelets (`CN=kube-apiserver-kubelet-client`,
    /// `O=system:masters`).
    pub fn apiserver_kubelet_client_cert_path(&self) -> PathBuf {
        self.pki_dir().join("apiserver-kubelet-client.crt")
    }

    /// The key of [`ControlPlane::apiserver_kubelet_client_cert_path`].
    pub fn apiserver_kubelet_client_key_path(&self) -> PathBuf {
        self.pki_dir().join("apiserver-kubelet-client.key")
    }

    /// The audit log: every request of a `system:node:*` user at Metadata level (JSON lines).
    pub fn audit_log_path(&self) -> &Path {
        &self.audit_log
    }

    /// Every `export` of `scripts/control-plane.sh env` (KUBECONFIG, ETCDCTL_ENDPOINTS, ...).
    pub fn env(&self) -> &BTreeMap<String, String> {
        &self.env
    }

    /// A client acting as the admin (`system:masters`).
    pub async fn admin_client(&self) -> Result<kube::Client, ClusterError> {
        client_from(&self.admin_kubeconfig).await
    }

    /// Issues (once; cached on disk) the identity of node `node_name`: a client cert
    /// `CN=system:node:<node_name>`, `O=system:nodes`, its kubeconfig (returned), and a kubelet
    /// serving cert ([`NodeIdentity`]).
    pub async fn node_kubeconfig(&self, node_name: &str) -> Result<PathBuf, ClusterError> {
        Ok(self.node_identity(node_name).await?.kubeconfig)
    }

    /// Issues (once; cached on disk) every file of node `node_name`'s identity.
    pub async fn node_identity(&self, node_name: &str) -> Result<NodeIdentity, ClusterError> {
        if !valid_node_name(node_name) {
            return Err(ClusterError::InvalidNodeName {
                name: node_name.to_string(),
            });
        }
        let out = run_script_env(&["node-kubeconfig", node_name], &self.script_env).await?;
        let kubeconfig = PathBuf::from(out.trim());
        let dir = kubeconfig
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok(NodeIdentity {
            node_name: node_name.to_string(),
            client_cert: dir.join("node.crt"),
            client_key: dir.join("node.key"),
            serving_cert: dir.join("kubelet.crt"),
            serving_key: dir.join("kubelet.key"),
            kubeconfig,
        })
    }

    /// A client acting as node `node_name` (issuing its identity if needed).
    pub async fn node_client(&self, node_name: &str) -> Result<kube::Client, ClusterError> {
        client_from(&self.node_kubeconfig(node_name).await?).await
    }

    /// Runs `kubectl` as the admin.
    pub async fn kubectl(&self, args: &[&str]) -> Result<Output, ClusterError> {
        self.kubectl_as(&self.admin_kubeconfig, args).await
    }

    /// Runs `kubectl` with the given kubeconfig. The output is returned whatever the exit
    /// status (`kubectl auth can-i` answers "no" with status 1).
    pub async fn kubectl_as(
        &self,
        kubeconfig: &Path,
        args: &[&str],
    ) -> Result<Output, ClusterError> {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|source| ClusterError::Spawn {
                command: format!("kubectl {}", args.join(" ")),
                error: source,
            })
    }
}

/// The files of one node's identity, under the control plane's state dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The node name.
    pub node_name: String,
    /// Its kubeconfig (certs embedded).
    pub kubeconfig: PathBuf,
    /// Client cert `CN=system:node:<node>`, `O=system:nodes` (signed by the cluster CA).
    pub client_cert: PathBuf,
    /// Key of `client_cert`.
    pub client_key: PathBuf,
    /// Kubelet serving cert for the node name, localhost, 127.0.0.1, ::1 (signed by the
    /// kubelet CA).
    pub serving_cert: PathBuf,
    /// Key of `serving_cert`.
    pub serving_key: PathBuf,
}

/// A client from a kubeconfig file (its current context).
pub async fn client_from(path: &Path) -> Result<kube::Client, ClusterError> {
    let kubeconfig = Kubeconfig::read_from(path).map_err(|source| ClusterError::Kubeconfig {
        path: path.to_path_buf(),
        error: source,
    })?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|source| ClusterError::Kubeconfig {
            path: path.to_path_buf(),
            error: source,
        })?;
    kube::Client::try_from(config).map_err(|source| ClusterError::Client {
        path: path.to_path_buf(),
        error: source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_export_lines() {
        let env = parse_env(
            "export KUBECONFIG=/a/admin.kubeconfig\nnoise\nexport ETCDCTL_API=3\n  export X=a=b\n",
        );
        assert_eq!(
            env.get("KUBECONFIG").map(String::as_str),
            Some("/a/admin.kubeconfig")
        );
        assert_eq!(env.get("ETCDCTL_API").map(String::as_str), Some("3"));
        assert_eq!(env.get("X").map(String::as_str), Some("a=b"));
        assert_eq!(env.len(), 3);
    }

    #[test]
    fn node_names() {
        for (name, ok) in [
            ("kubelet-rs-node", true),
            ("node-1.example", true),
            ("a", true),
            ("", false),
            ("Node", false),
            ("-node", false),
            ("node-", false),
            ("a..b", false),
            ("node/../x", false),
            ("node name", false),
        ] {
            assert_eq!(valid_node_name(name), ok, "{name:?}");
        }
    }

    #[test]
    fn missing_env_is_named() {
        let err = ControlPlane::from_env(BTreeMap::new()).unwrap_err();
        assert!(
            matches!(err, ClusterError::MissingEnv { ref name } if name == "KUBELET_RS_ADMIN_KUBECONFIG"),
            "{err}"
        );
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail(b"hello world", 5), "world");
        assert_eq!(tail(b"hi", 10), "hi");
        assert_eq!(tail("aé".as_bytes(), 1), "");
    }
}
