//! The `deviceplugin/v1beta1` messages and services, generated from
//! `proto/deviceplugin/v1beta1/api.proto` by `build.rs`: the `Registration` server the
//! kubelet runs ([`registration_server`]), the `DevicePlugin` client it uses to call a
//! plugin ([`device_plugin_client`]), and, for fake plugins in tests, the other two halves.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::all,
    clippy::pedantic
)]

tonic::include_proto!("v1beta1");
