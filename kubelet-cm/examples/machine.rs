//! Prints what this machine reports: machine info, cgroup layout, capacity and allocatable
//! with Go's default kubelet configuration. Read-only: creates no cgroups.
//!
//! `cargo run -p kubelet-cm --example machine [-- <kubelet root dir>]`

use std::path::{Path, PathBuf};

use kubelet_cm::machine::{check_swap, hugepage_resource_name, read_machine_info};
use kubelet_cm::{cgroups, CmConfig, NodeResources};

fn main() -> Result<(), kubelet_cm::Error> {
    let config = CmConfig {
        root_dir: std::env::args()
            .nth(1)
            .map(PathBuf::from)
            .unwrap_or_else(|| CmConfig::default().root_dir),
        ..CmConfig::default()
    };
    let machine = read_machine_info(&config.root, &config.root_dir)?;
    println!("machine info:");
    println!(
        "  cpus: {} (physical cores {}, sockets {})",
        machine.num_cores, machine.num_physical_cores, machine.num_sockets
    );
    println!("  memory: {} bytes", machine.memory_capacity);
    for h in &machine.hugepages {
        println!("  {}: {} pages", hugepage_resource_name(h), h.num_pages);
    }
    println!("  boot id: {}", machine.boot_id);
    println!("  machine id: {}", machine.machine_id);
    println!("  system uuid: {:?}", machine.system_uuid);
    println!("  kernel: {}", machine.kernel_version);
    println!("  os image: {}", machine.os_image);
    println!("  pid_max: {}", machine.max_pids);
    println!("  boot time: {} (Unix seconds)", machine.boot_time_seconds);
    println!(
        "  ephemeral storage ({}): {} bytes, {} inodes",
        config.root_dir.display(),
        machine.ephemeral_storage_capacity,
        machine.ephemeral_storage_inodes
    );
    match check_swap(&config.root) {
        Ok(()) => println!("swap: off"),
        Err(e) => println!("swap: {e}"),
    }
    let mounts = cgroups::detect(Path::new("/"))?;
    println!("cgroups: {:?}", mounts.mode);
    for (controller, mount) in &mounts.v1 {
        println!("  v1 {controller}: {}", mount.display());
    }
    if let Some(u) = &mounts.unified {
        println!("  unified: {}", u.display());
    }
    let res = NodeResources::compute(&config, &machine)?;
    println!("capacity (Go defaults):");
    for (k, v) in &res.capacity {
        println!("  {k}: {}", v.0);
    }
    println!("allocatable (evictionHard memory.available<100Mi, nodefs.available<10%):");
    for (k, v) in &res.allocatable {
        println!("  {k}: {}", v.0);
    }
    println!(
        "kubepods limits (cpu in millicores): {:?}",
        res.kubepods_limits
    );
    Ok(())
}
