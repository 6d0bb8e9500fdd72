//! The `podresources/v1` messages and service, generated from
//! `proto/podresources/v1/api.proto` by `build.rs`: the `PodResourcesLister` server the
//! kubelet runs ([`pod_resources_lister_server`]) and the client node agents (and the tests)
//! call it with ([`pod_resources_lister_client`]).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::all,
    clippy::pedantic
)]

tonic::include_proto!("v1");
