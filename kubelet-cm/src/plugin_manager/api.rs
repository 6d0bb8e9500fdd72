//! The `pluginregistration` (v1) messages and services, generated from
//! `proto/pluginregistration/v1/api.proto` by `build.rs`: the `Registration` client the
//! kubelet uses to call a plugin's registration socket ([`registration_client`]) and, for
//! fake plugins in tests, the server half ([`registration_server`]).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::all,
    clippy::pedantic
)]

tonic::include_proto!("pluginregistration");
