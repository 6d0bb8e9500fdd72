//! Generates the pod resources API (`podresources/v1`): messages, the `PodResourcesLister`
//! server the kubelet runs and the client agents use (`src/pod_resources/api.rs` includes
//! them).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const PROTO: &str = "proto/podresources/v1/api.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&[PROTO], &["proto"])?;
    Ok(())
}
