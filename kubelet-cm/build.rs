//! Generates the `deviceplugin/v1beta1` gRPC messages, client and server
//! (`src/device_plugins/api.rs` includes them).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const PROTO: &str = "proto/deviceplugin/v1beta1/api.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .btree_map(".")
        .compile_protos(&[PROTO], &["proto"])?;
    Ok(())
}
