//! The test registry (`scripts/registry.sh`): Debian's docker-registry (distribution 2.8) on
//! 127.0.0.1 with TLS from a throwaway CA and htpasswd basic auth, holding the local images
//! as `<registry>/kubelet-rs/busybox:1.0` and `.../pause:1.0`. The containerd of the node
//! environment (`KUBELET_RS_NODE_INSTANCE`, default the shared one) trusts it through its
//! registry hosts directory, which it reads at every pull; [`Registry::ensure`] checks that
//! the running containerd was configured with that directory.

use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine as _;
use tokio::sync::OnceCell;

/// Errors of the registry harness.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A script failed.
    #[error("{command} failed: {stderr}")]
    Script {
        /// The command line.
        command: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// The node's containerd does not read the registry hosts directory.
    #[error("the containerd of the node environment ({config}) was set up without the registry hosts directory {hosts_dir}: run scripts/node-env.sh down and up again (or use a KUBELET_RS_NODE_INSTANCE)")]
    NotTrusted {
        /// The containerd configuration.
        config: String,
        /// The hosts directory it should name.
        hosts_dir: String,
    },
    /// A variable is missing from a script's env output.
    #[error("no {0} in the script's env output")]
    MissingEnv(String),
}

/// The running registry. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Registry {
    /// `127.0.0.1:<port>`.
    pub address: String,
    /// The htpasswd user.
    pub user: String,
    /// Its password.
    pub password: String,
    /// The throwaway CA.
    pub ca: PathBuf,
}

static ENSURED: OnceCell<Registry> = OnceCell::const_new();

fn scripts() -> PathBuf {
    crate::scripts::scripts_dir()
}

async fn run(script: &str, args: &[&str]) -> Result<String, RegistryError> {
    let path = scripts().join(script);
    let command = format!("{} {}", path.display(), args.join(" "));
    let out = crate::cluster::script_command(&path)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| RegistryError::Script {
            command: command.clone(),
            stderr: e.to_string(),
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(RegistryError::Script {
            command,
            stderr: stderr
                .chars()
                .rev()
                .take(3000)
                .collect::<String>()
                .chars()
                .rev()
                .collect(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn vars(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(|l| l.trim().trim_start_matches("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

impl Registry {
    /// The registry, started (with the images pushed) when not running. Fails when the
    /// node's containerd does not trust it.
    pub async fn ensure() -> Result<Registry, RegistryError> {
        ENSURED
            .get_or_try_init(|| async {
                let node = vars(&run("node-env.sh", &["env"]).await?);
                let get = |m: &BTreeMap<String, String>, k: &str| {
                    m.get(k)
                        .cloned()
                        .ok_or_else(|| RegistryError::MissingEnv(k.into()))
                };
                let hosts_dir = get(&node, "KUBELET_RS_REGISTRY_HOSTS_DIR")?;
                let config = format!(
                    "{}/containerd/config.toml",
                    get(&node, "KUBELET_RS_NODE_DIR")?
                );
                let text = std::fs::read_to_string(&config).unwrap_or_default();
                if !text.contains(&format!("config_path = \"{hosts_dir}\"")) {
                    return Err(RegistryError::NotTrusted { config, hosts_dir });
                }
                if run("registry.sh", &["status"]).await.is_err() {
                    run("registry.sh", &["up"]).await?;
                }
                let env = vars(&run("registry.sh", &["env"]).await?);
                Ok(Registry {
                    address: get(&env, "KUBELET_RS_REGISTRY")?,
                    user: get(&env, "KUBELET_RS_REGISTRY_USER")?,
                    password: get(&env, "KUBELET_RS_REGISTRY_PASSWORD")?,
                    ca: get(&env, "KUBELET_RS_REGISTRY_CA")?.into(),
                })
            })
            .await
            .cloned()
    }

    /// The busybox image in the registry.
    pub fn busybox(&self) -> String {
        format!("{}/kubelet-rs/busybox:1.0", self.address)
    }

    /// A `.dockerconfigjson` document for `registry` with these credentials.
    pub fn docker_config_json(registry: &str, user: &str, password: &str) -> String {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!(r#"{{"auths":{{"{registry}":{{"auth":"{auth}"}}}}}}"#)
    }
}
