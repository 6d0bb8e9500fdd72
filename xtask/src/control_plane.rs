//! `cargo xtask control-plane {build,up,down,status,env,node-kubeconfig,audit-rate,
//! apiserver-stop,apiserver-start}`: the real
//! v1.20.2 control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler on
//! 127.0.0.1) of `scripts/control-plane.sh`.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Subcommand;

/// What to do with the control plane.
#[derive(Subcommand)]
pub enum ControlPlaneCmd {
    /// Build kube-apiserver, kube-controller-manager and kube-scheduler v1.20.2 once (cached).
    Build,
    /// Build if needed, then start etcd and the control plane; prints the env exports.
    Up,
    /// Stop everything `up` started and remove its state (the cached binaries stay).
    Down,
    /// Print what runs; fails when the apiserver is not ready.
    Status,
    /// Print the shell exports (KUBECONFIG, KUBELET_RS_NODE_KUBECONFIG, ...).
    Env,
    /// Issue (once) a node identity CN=system:node:NODE and print its kubeconfig path.
    NodeKubeconfig {
        /// The node name.
        node: String,
    },
    /// Requests per minute by verb and resource from the audit log (kubelets by default).
    AuditRate {
        /// Only users whose name starts with this.
        #[arg(default_value = "system:node:")]
        user_prefix: String,
        /// Only the last this many seconds (default: all the log covers).
        #[arg(default_value_t = 0)]
        last_seconds: u64,
    },
    /// Stop only the apiserver (outage tests).
    ApiserverStop,
    /// Start the apiserver again and wait until it is ready.
    ApiserverStart,
}

fn script() -> PathBuf {
    crate::repo_root().join("scripts").join("control-plane.sh")
}

/// Runs the control-plane script with the subcommand's arguments.
pub fn run(cmd: ControlPlaneCmd) -> Result<()> {
    let args: Vec<String> = match cmd {
        ControlPlaneCmd::Build => vec!["build".into()],
        ControlPlaneCmd::Up => vec!["up".into()],
        ControlPlaneCmd::Down => vec!["down".into()],
        ControlPlaneCmd::Status => vec!["status".into()],
        ControlPlaneCmd::Env => vec!["env".into()],
        ControlPlaneCmd::NodeKubeconfig { node } => vec!["node-kubeconfig".into(), node],
        ControlPlaneCmd::AuditRate {
            user_prefix,
            last_seconds,
        } => vec!["audit-rate".into(), user_prefix, last_seconds.to_string()],
        ControlPlaneCmd::ApiserverStop => vec!["apiserver-stop".into()],
        ControlPlaneCmd::ApiserverStart => vec!["apiserver-start".into()],
    };
    let path = script();
    let status = Command::new("bash")
        .arg(&path)
        .args(&args)
        .status()
        .with_context(|| format!("running {}", path.display()))?;
    if !status.success() {
        bail!("{} {} failed: {status}", path.display(), args.join(" "));
    }
    Ok(())
}

/// Runs the control-plane script with `args` and returns what it prints on stdout (its
/// stderr passes through).
pub(crate) async fn output(args: &[&str]) -> Result<String> {
    let path = script();
    let out = tokio::process::Command::new("bash")
        .arg(&path)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .with_context(|| format!("running {}", path.display()))?;
    if !out.status.success() {
        bail!(
            "{} {} failed: {}",
            path.display(),
            args.join(" "),
            out.status
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The admin kubeconfig of the control plane (`KUBELET_RS_ADMIN_KUBECONFIG` of `env`).
pub(crate) async fn admin_kubeconfig() -> Result<PathBuf> {
    let env = output(&["env"]).await?;
    env.lines()
        .find_map(|l| l.strip_prefix("export KUBELET_RS_ADMIN_KUBECONFIG="))
        .map(|p| PathBuf::from(p.trim()))
        .context("control-plane.sh env printed no KUBELET_RS_ADMIN_KUBECONFIG")
}

/// Issues (once) the identity `system:node:NODE` and returns its kubeconfig's path.
pub(crate) async fn node_kubeconfig(node: &str) -> Result<PathBuf> {
    let out = output(&["node-kubeconfig", node]).await?;
    let path = out
        .lines()
        .last()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .with_context(|| format!("node-kubeconfig {node} printed no path"))?;
    Ok(PathBuf::from(path))
}
