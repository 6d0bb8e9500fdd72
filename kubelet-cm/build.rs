//! Generates the gRPC messages, clients and servers of the kubelet's plugin APIs:
//! `deviceplugin/v1beta1` (`src/device_plugins/api.rs` includes it),
//! `pluginregistration/v1` (`src/plugin_manager/api.rs` includes it) and the CSI API
//! `csi/v1` (`src/csi/api.rs` includes it; the file is made by
//! `scripts/csi-proto-from-tree.py`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const PROTOS: [&str; 3] = [
        "proto/deviceplugin/v1beta1/api.proto",
        "proto/pluginregistration/v1/api.proto",
        "proto/csi/v1/csi.proto",
    ];
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .btree_map(".")
        .compile_protos(&PROTOS, &["proto"])?;
    Ok(())
}
