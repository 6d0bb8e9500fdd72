//! `cargo xtask hollow-nodes --nodes N --pods-per-node M [--duration S]`: N kubelet engines on
//! the simulated runtime as N members of the real cluster, in one process (the role of
//! kubemark's hollow node).
//!
//! Each hollow node ([`node`]) is composed through the library as `kubelet --kubeconfig`
//! composes itself: its own identity `system:node:hollow-node-<i>` (a client certificate from
//! `scripts/control-plane.sh node-kubeconfig`, so the Node authorizer and NodeRestriction treat
//! it as that node), its own API clients and cluster member (registration, lease, node status,
//! API pod source, pod status, events, mirror pods), a `SimRuntime`, a `FakeContainerManager`
//! sized for M pods and no root directory. It registers with the label and the taint
//! `kubelet-rs.io/hollow=true:NoSchedule`, so only the pods made here ([`workload`]: they
//! tolerate the taint and select the label) are scheduled onto hollow nodes.
//!
//! A run, phase by phase:
//! 1. leftovers of an interrupted earlier run are removed (hollow Nodes and leases, run
//!    namespaces); the node identities are issued (cached per machine);
//! 2. the process RSS is read (the baseline), the N nodes start; the time until the API server
//!    shows all of them Ready, and the RSS then;
//! 3. a namespace `hollow-<run id>` with N×M pods, bound by the real scheduler; the time until
//!    the API server shows all Running;
//! 4. an idle window of `--duration` seconds: the process's CPU seconds, its RSS at the end and
//!    the hollow nodes' request rate from the audit log;
//! 5. teardown: the pods are deleted (the hollow kubelets stop their containers and delete the
//!    objects) and the namespace; then the nodes stop and their Node objects and leases go.
//!
//! Teardown runs after an error or Ctrl-C/SIGTERM too (a second signal abandons it; the next
//! run removes the leftovers). Run it under the integration lock: it loads the shared
//! apiserver.

mod cluster;
mod node;
mod report;
mod workload;

use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::proc_stats::{clock_ticks, cpu_ticks, memory_kib, sockets};
use node::HollowNode;
use report::Report;

/// Flags of `cargo xtask hollow-nodes`.
#[derive(clap::Args, Debug, Clone)]
pub struct HollowArgs {
    /// Hollow nodes to run.
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    /// Pods per node (each node's capacity and maxPods).
    #[arg(long, default_value_t = 30)]
    pods_per_node: usize,
    /// Seconds of the steady idle window (CPU, RSS, request rate).
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Seconds to wait for the nodes to be Ready, the pods Running, the pods gone.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Pod creations in flight at once.
    #[arg(long, default_value_t = 20)]
    create_concurrency: usize,
    /// Seconds after all pods run before the idle window starts (status writes settle).
    #[arg(long, default_value_t = 15)]
    settle: u64,
}

/// Runs the hollow nodes on a multi-threaded runtime of their own (as a kubelet runs).
pub async fn run(args: HollowArgs) -> Result<()> {
    if args.nodes == 0 || args.nodes > 100_000 {
        bail!("--nodes must be between 1 and 100000");
    }
    if args.pods_per_node > 10_000 {
        bail!("--pods-per-node must be at most 10000");
    }
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("building the hollow nodes' runtime")?;
        rt.block_on(hollow(args))
    })
    .await
    .context("hollow nodes thread")?
}

/// Sleeps for `d`, or fails at once when `stop` fires.
async fn pause(stop: &CancellationToken, d: Duration) -> Result<()> {
    tokio::select! {
        _ = stop.cancelled() => bail!("interrupted"),
        _ = tokio::time::sleep(d) => Ok(()),
    }
}

/// The first SIGINT/SIGTERM cancels `stop` (the run tears down); a second one exits at once.
fn watch_signals(stop: CancellationToken) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    tokio::spawn(async move {
        for n in 0.. {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            if n == 0 {
                eprintln!(
                    "[hollow] interrupted: tearing down (again to abandon; the next run cleans up)"
                );
                stop.cancel();
            } else {
                eprintln!("[hollow] teardown abandoned");
                std::process::exit(130);
            }
        }
    });
    Ok(())
}

fn run_id() -> String {
    let nanos = kubelet_core::clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}", (nanos / 1_000_000) & 0xff_ffff)
}

async fn self_memory_kib() -> Result<(u64, u64)> {
    memory_kib(std::process::id()).await
}

async fn hollow(args: HollowArgs) -> Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let stop = CancellationToken::new();
    watch_signals(stop.clone())?;
    let mut report = Report {
        nodes: args.nodes,
        pods_per_node: args.pods_per_node,
        run_id: run_id(),
        release: !cfg!(debug_assertions),
        ..Report::default()
    };
    let namespace = workload::namespace_name(&report.run_id);
    let admin = cluster::admin_client().await?;
    let left = cluster::remove_leftovers(&admin).await?;
    if !left.is_empty() {
        eprintln!("[hollow] removed leftovers: {}", left.join(", "));
    }
    let mut fleet = Vec::new();
    let result = phases(&args, &admin, &namespace, &mut fleet, &mut report, &stop).await;
    if let Err(e) = &result {
        report.notes.push(format!("run failed: {e:#}"));
    }
    teardown(&args, &admin, &namespace, fleet, &mut report).await;
    report.print();
    result
}

async fn phases(
    args: &HollowArgs,
    admin: &kube::Client,
    namespace: &str,
    fleet: &mut Vec<HollowNode>,
    report: &mut Report,
    stop: &CancellationToken,
) -> Result<()> {
    let timeout = Duration::from_secs(args.timeout);
    let t = Instant::now();
    let kubeconfigs = cluster::node_kubeconfigs(args.nodes, stop).await?;
    report.identities = Some(t.elapsed());
    let max_pods = u32::try_from(args.pods_per_node).context("--pods-per-node")?;

    report.baseline_kib = Some(self_memory_kib().await?.0);
    let sockets_before = sockets(std::process::id()).await?;
    eprintln!("[hollow] starting {} nodes", args.nodes);
    let t = Instant::now();
    for (i, kc) in kubeconfigs.iter().enumerate() {
        if stop.is_cancelled() {
            bail!("interrupted");
        }
        fleet.push(HollowNode::start(i, kc, max_pods).await?);
    }
    let names: Vec<String> = fleet.iter().map(|n| n.name().to_string()).collect();
    cluster::wait_ready(admin, &names, timeout, stop).await?;
    report.nodes_ready = Some(t.elapsed());
    report.started_kib = Some(self_memory_kib().await?);
    eprintln!(
        "[hollow] {} nodes Ready after {:.1} s",
        args.nodes,
        t.elapsed().as_secs_f64()
    );

    let total = args.nodes * args.pods_per_node;
    workload::create_namespace(admin, namespace, &report.run_id, stop).await?;
    eprintln!("[hollow] creating {total} pods in {namespace}");
    let t = Instant::now();
    workload::create_pods(
        admin,
        namespace,
        &report.run_id,
        total,
        args.create_concurrency,
        stop,
    )
    .await?;
    report.pods_created = Some(t.elapsed());
    workload::wait_running(admin, namespace, timeout, stop).await?;
    report.pods_running = Some(t.elapsed());
    eprintln!(
        "[hollow] {total} pods Running after {:.1} s",
        t.elapsed().as_secs_f64()
    );

    pause(stop, Duration::from_secs(args.settle)).await?;
    eprintln!("[hollow] idle window of {} s", args.duration);
    let tick = clock_ticks().await;
    let pid = std::process::id();
    let components = cluster::control_plane_pids().await;
    let mut cp0 = Vec::new();
    for (name, cpid) in &components {
        cp0.push((name.clone(), *cpid, cpu_ticks(*cpid).await.ok()));
    }
    let (c0, w0) = (cpu_ticks(pid).await?, Instant::now());
    pause(stop, Duration::from_secs(args.duration)).await?;
    let (c1, wall) = (cpu_ticks(pid).await?, w0.elapsed());
    report.idle_cpu = Some((c1.saturating_sub(c0) as f64 / tick, wall));
    for (name, cpid, before) in cp0 {
        if let (Some(b), Ok(a)) = (before, cpu_ticks(cpid).await) {
            report
                .control_plane_cpu
                .push((name, a.saturating_sub(b) as f64 / tick));
        }
    }
    report.steady_kib = Some(self_memory_kib().await?);
    report.sockets = Some((sockets_before, sockets(pid).await?));
    match cluster::audit_rate(wall.as_secs()).await {
        Ok(a) => report.audit = Some(a),
        Err(e) => report.notes.push(format!("no audit rate: {e:#}")),
    }
    let ready = cluster::ready_nodes(admin, &names).await?;
    let not_running = workload::not_running(admin, namespace).await?;
    if ready < names.len() || not_running > 0 {
        report.notes.push(format!(
            "at the end of the idle window {ready}/{} nodes Ready, {not_running} pods not Running",
            names.len()
        ));
    }
    Ok(())
}

/// Deletes the pods while the nodes still run (so they stop them and delete the objects; the
/// pods are force-deleted when that does not finish) and the namespace, then stops the nodes,
/// deletes their Node objects and leases and waits for the namespace to go. Failures become
/// notes.
async fn teardown(
    args: &HollowArgs,
    admin: &kube::Client,
    namespace: &str,
    fleet: Vec<HollowNode>,
    report: &mut Report,
) {
    eprintln!("[hollow] teardown");
    let t = Instant::now();
    // The pods are deleted gracefully (node by node); the hollow kubelets stop their
    // containers and delete the objects. The namespace goes too (its events with it).
    let names: Vec<String> = fleet.iter().map(|n| n.name().to_string()).collect();
    let conc = args.create_concurrency;
    let deleted = workload::delete_pods(admin, namespace, &names, None, conc).await;
    let limit = Duration::from_secs(args.timeout);
    let gone = match &deleted {
        Ok(()) if !fleet.is_empty() => workload::wait_gone(admin, namespace, limit).await,
        _ => false,
    };
    if gone {
        if report.pods_created.is_some() {
            report.pods_deleted = Some(t.elapsed());
        }
    } else {
        match deleted {
            Err(e) => report.notes.push(format!("{e:#}")),
            Ok(()) if !fleet.is_empty() => report.notes.push(format!(
                "pods not gone {limit:?} after their deletion: forced"
            )),
            Ok(()) => {}
        }
        if let Err(e) = workload::delete_pods(admin, namespace, &names, Some(0), conc).await {
            report.notes.push(format!("{e:#}"));
        }
    }
    if let Err(e) = cluster::delete_namespace(admin, namespace).await {
        report.notes.push(format!("{e:#}"));
    }
    for n in &fleet {
        n.stop();
    }
    let waits = fleet.into_iter().map(|n| n.wait(Duration::from_secs(60)));
    for r in futures::future::join_all(waits).await {
        if let Err(e) = r {
            report.notes.push(format!("{e:#}"));
        }
    }
    report
        .notes
        .extend(cluster::delete_nodes(admin, &names).await);
    // Last, as it needs no node: the namespace controller also deletes the pods' events.
    if !cluster::wait_namespace_gone(admin, namespace, limit).await {
        report.notes.push(format!(
            "namespace {namespace} still terminating {limit:?} after its deletion (the namespace controller finishes it)"
        ));
    }
    eprintln!(
        "[hollow] teardown done in {:.1} s",
        t.elapsed().as_secs_f64()
    );
}
