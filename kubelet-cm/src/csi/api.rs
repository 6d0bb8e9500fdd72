//! The CSI API (`csi.v1`, spec v1.2.0) generated from `proto/csi/v1/csi.proto` by `build.rs`:
//! the `Identity` and `Node` clients the kubelet calls a driver with and, for drivers in
//! tests, the server halves.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::all,
    clippy::pedantic
)]

tonic::include_proto!("csi.v1");
