//! `ListPodSandbox` and `ListContainers`, the two calls the relisting PLEG makes every second
//! (and every pod sync, narrowed to the pod), decoded into wire-compatible subsets of CRI's
//! messages instead of k8s-cri's generated ones.
//!
//! The generated messages decode every string into its own `String` and every
//! `map<string, string>` into a `HashMap` (two allocations and a SipHash per entry), and the
//! kubelet then reads five labels and one annotation out of them. The subsets here keep only
//! the fields the summaries need; their strings are [`Bytes`] slices of the response buffer
//! (no copy: they share its reference count), a map is read as what it is on the wire (`repeated Entry { key =
//! 1; value = 2 }`), and every other field is skipped unread. Only the summaries' own strings
//! are allocated. Measured on 110 pods (86 KB + 54 KB of responses): 0.80–0.90 ms of CPU per
//! pair of listings decoded and mapped with the generated types, 0.31–0.34 ms with these.
//!
//! What the summaries read is the same as [`mapping::container_summary`] and
//! [`mapping::sandbox_summary`] make of the generated messages (a property test holds the two
//! together): a map key given twice counts its last value, as protobuf's map semantics (and
//! the generated `HashMap`) have it. One difference: a string that is not valid UTF-8 is read
//! lossily instead of failing the whole listing.

use bytes::Bytes;
use k8s_cri::v1 as cri;
use kubelet_core::runtime::{ContainerSummary, ListFilter, PodRef, RuntimeResult, SandboxSummary};
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;

use crate::client::ctx;
use crate::mapping::{
    self, CONTAINER_HASH_ANNOTATION, CONTAINER_NAME_LABEL, POD_NAMESPACE_LABEL, POD_NAME_LABEL,
    POD_UID_LABEL,
};
use crate::sandbox::uid_selector;
use crate::traced::TracedChannel;
use crate::CriRuntime;

/// The gRPC client the listings are made with (the runtime service's channel).
pub(crate) type ListingClient = Grpc<TracedChannel>;

/// The runtime service's listing client over `channel`, with the crate's message size limits.
pub(crate) fn client(channel: TracedChannel) -> ListingClient {
    Grpc::new(channel)
        .max_decoding_message_size(crate::MAX_MESSAGE_SIZE)
        .max_encoding_message_size(crate::MAX_MESSAGE_SIZE)
}

/// `ListPodSandbox`: the kubelet's sandboxes, narrowed by `filter`.
pub(crate) async fn sandboxes(
    rt: &CriRuntime,
    filter: &ListFilter,
) -> RuntimeResult<Vec<SandboxSummary>> {
    let request = cri::ListPodSandboxRequest {
        filter: Some(cri::PodSandboxFilter {
            label_selector: uid_selector(filter),
            ..Default::default()
        }),
    };
    let response: wire::ListPodSandboxResponse = rt
        .call(
            ctx("ListPodSandbox", "sandbox", ""),
            rt.deadline(),
            unary(
                rt,
                (
                    "ListPodSandbox",
                    "/runtime.v1.RuntimeService/ListPodSandbox",
                ),
                rt.request(request, rt.deadline()),
            ),
        )
        .await?;
    Ok(response.items.iter().filter_map(sandbox_summary).collect())
}

/// `ListContainers`: the kubelet's containers, narrowed by `filter`.
pub(crate) async fn containers(
    rt: &CriRuntime,
    filter: &ListFilter,
) -> RuntimeResult<Vec<ContainerSummary>> {
    let request = cri::ListContainersRequest {
        filter: Some(cri::ContainerFilter {
            label_selector: uid_selector(filter),
            ..Default::default()
        }),
    };
    let response: wire::ListContainersResponse = rt
        .call(
            ctx("ListContainers", "container", ""),
            rt.deadline(),
            unary(
                rt,
                (
                    "ListContainers",
                    "/runtime.v1.RuntimeService/ListContainers",
                ),
                rt.request(request, rt.deadline()),
            ),
        )
        .await?;
    Ok(response
        .containers
        .iter()
        .filter_map(container_summary)
        .collect())
}

/// One unary call of the runtime service, as the generated client makes it (`method`: the
/// method's name and its path), decoding the answer into `Resp`.
async fn unary<Req, Resp>(
    rt: &CriRuntime,
    (method, path): (&'static str, &'static str),
    request: tonic::Request<Req>,
) -> Result<tonic::Response<Resp>, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = rt.listing.clone();
    grpc.ready().await.map_err(|e| {
        // The generated client's wording, which `client::map_status` knows as a transport
        // failure.
        tonic::Status::unknown(format!("Service was not ready: {e}"))
    })?;
    let mut request = request;
    request
        .extensions_mut()
        .insert(tonic::GrpcMethod::new("runtime.v1.RuntimeService", method));
    grpc.unary(
        request,
        PathAndQuery::from_static(path),
        tonic_prost::ProstCodec::default(),
    )
    .await
}

/// A listed sandbox; `None` when it carries no kubelet labels.
fn sandbox_summary(s: &wire::PodSandbox) -> Option<SandboxSummary> {
    Some(SandboxSummary {
        id: text(&s.id),
        pod: pod_ref(&s.labels)?,
        attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        state: mapping::sandbox_state(s.state),
        created_at: s.created_at,
    })
}

/// A listed container; `None` when it carries no kubelet labels.
fn container_summary(c: &wire::Container) -> Option<ContainerSummary> {
    let pod = pod_ref(&c.labels)?;
    let name = lookup(&c.labels, CONTAINER_NAME_LABEL)
        .or_else(|| c.metadata.as_ref().map(|m| &m.name))
        .map(text)?;
    Some(ContainerSummary {
        id: text(&c.id),
        sandbox_id: text(&c.pod_sandbox_id),
        pod,
        name,
        attempt: c.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        hash: mapping::parse_hash(
            lookup(&c.annotations, CONTAINER_HASH_ANNOTATION)
                .and_then(|h| std::str::from_utf8(h).ok()),
        ),
        image: c.image.as_ref().map(|i| text(&i.image)).unwrap_or_default(),
        image_ref: text(&c.image_ref),
        state: mapping::container_state(c.state),
        created_at: c.created_at,
    })
}

/// The pod identity from kubelet labels (as [`mapping::pod_ref_from_labels`]).
fn pod_ref(labels: &[wire::Entry]) -> Option<PodRef> {
    Some(PodRef {
        uid: text(lookup(labels, POD_UID_LABEL)?),
        name: lookup(labels, POD_NAME_LABEL).map(text).unwrap_or_default(),
        namespace: lookup(labels, POD_NAMESPACE_LABEL)
            .map(text)
            .unwrap_or_default(),
    })
}

/// The value of `key` in a map read from the wire: the last one given, as in a protobuf map.
fn lookup<'a>(entries: &'a [wire::Entry], key: &str) -> Option<&'a Bytes> {
    entries
        .iter()
        .rev()
        .find(|e| e.key.as_ref() == key.as_bytes())
        .map(|e| &e.value)
}

fn text(b: &Bytes) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The subsets of CRI v1's messages (`api.proto`) the listings are decoded into: the same
/// field numbers and wire types; fields left out are skipped when decoding.
pub(crate) mod wire {
    use bytes::Bytes;

    /// One entry of a `map<string, string>`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Entry {
        /// The key.
        #[prost(bytes = "bytes", tag = "1")]
        pub key: Bytes,
        /// The value.
        #[prost(bytes = "bytes", tag = "2")]
        pub value: Bytes,
    }

    /// `ListPodSandboxResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListPodSandboxResponse {
        /// `items`.
        #[prost(message, repeated, tag = "1")]
        pub items: Vec<PodSandbox>,
    }

    /// `PodSandbox` without `annotations` and `runtime_handler`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PodSandbox {
        /// `id`.
        #[prost(bytes = "bytes", tag = "1")]
        pub id: Bytes,
        /// `metadata`.
        #[prost(message, optional, tag = "2")]
        pub metadata: Option<PodSandboxMetadata>,
        /// `state` (a `PodSandboxState`).
        #[prost(int32, tag = "3")]
        pub state: i32,
        /// `created_at`.
        #[prost(int64, tag = "4")]
        pub created_at: i64,
        /// `labels`.
        #[prost(message, repeated, tag = "5")]
        pub labels: Vec<Entry>,
    }

    /// `PodSandboxMetadata`: only `attempt`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PodSandboxMetadata {
        /// `attempt`.
        #[prost(uint32, tag = "4")]
        pub attempt: u32,
    }

    /// `ListContainersResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListContainersResponse {
        /// `containers`.
        #[prost(message, repeated, tag = "1")]
        pub containers: Vec<Container>,
    }

    /// `Container`, whole but for the image spec's annotations.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Container {
        /// `id`.
        #[prost(bytes = "bytes", tag = "1")]
        pub id: Bytes,
        /// `pod_sandbox_id`.
        #[prost(bytes = "bytes", tag = "2")]
        pub pod_sandbox_id: Bytes,
        /// `metadata`.
        #[prost(message, optional, tag = "3")]
        pub metadata: Option<ContainerMetadata>,
        /// `image`.
        #[prost(message, optional, tag = "4")]
        pub image: Option<ImageSpec>,
        /// `image_ref`.
        #[prost(bytes = "bytes", tag = "5")]
        pub image_ref: Bytes,
        /// `state` (a `ContainerState`).
        #[prost(int32, tag = "6")]
        pub state: i32,
        /// `created_at`.
        #[prost(int64, tag = "7")]
        pub created_at: i64,
        /// `labels`.
        #[prost(message, repeated, tag = "8")]
        pub labels: Vec<Entry>,
        /// `annotations`.
        #[prost(message, repeated, tag = "9")]
        pub annotations: Vec<Entry>,
    }

    /// `ContainerMetadata`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ContainerMetadata {
        /// `name`.
        #[prost(bytes = "bytes", tag = "1")]
        pub name: Bytes,
        /// `attempt`.
        #[prost(uint32, tag = "2")]
        pub attempt: u32,
    }

    /// `ImageSpec`: only `image`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ImageSpec {
        /// `image`.
        #[prost(bytes = "bytes", tag = "1")]
        pub image: Bytes,
    }
}

#[cfg(test)]
#[path = "listing_tests.rs"]
mod tests;
