//! Images over CRI's image service: `ImageStatus`, `PullImage`, `ListImages`,
//! `RemoveImage` and `ImageFsInfo`.

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{
    ImageFsInfo, ImageInfo, PullImageRequest, RuntimeError, RuntimeResult,
};

use crate::client::ctx;
use crate::{mapping, CriRuntime};

fn image_info(i: cri::Image) -> ImageInfo {
    ImageInfo {
        id: i.id,
        repo_tags: i.repo_tags,
        repo_digests: i.repo_digests,
        size_bytes: i.size,
    }
}

/// `ImageStatus` as CRI answers it; `None` when the image is not present.
pub(crate) async fn raw_image_status(
    rt: &CriRuntime,
    image: &str,
) -> RuntimeResult<Option<cri::Image>> {
    let mut client = rt.images.clone();
    let req = rt.request(
        cri::ImageStatusRequest {
            image: Some(cri::ImageSpec {
                image: image.to_string(),
                ..Default::default()
            }),
            verbose: false,
        },
        rt.deadline(),
    );
    match rt
        .call(
            ctx("ImageStatus", "image", image),
            rt.deadline(),
            client.image_status(req),
        )
        .await
    {
        Ok(resp) => Ok(resp.image),
        Err(RuntimeError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `ImageStatus`: the image, or `None` when it is not present.
pub(crate) async fn status(rt: &CriRuntime, image: &str) -> RuntimeResult<Option<ImageInfo>> {
    Ok(raw_image_status(rt, image).await?.map(image_info))
}

/// `PullImage`, without a deadline (large images take longer than the request timeout);
/// failures of the pull itself become [`RuntimeError::ImagePull`].
pub(crate) async fn pull(rt: &CriRuntime, request: &PullImageRequest) -> RuntimeResult<String> {
    // As Go: a pull has no deadline (large images take longer than request_timeout).
    let mut client = rt.images.clone();
    let req = rt.request(
        cri::PullImageRequest {
            image: Some(cri::ImageSpec {
                image: request.image.clone(),
                ..Default::default()
            }),
            auth: request.auth.as_ref().map(|a| cri::AuthConfig {
                username: a.username.clone(),
                password: a.password.clone(),
                auth: a.auth.clone(),
                server_address: a.server_address.clone(),
                identity_token: a.identity_token.clone(),
                registry_token: a.registry_token.clone(),
            }),
            sandbox_config: request
                .sandbox
                .as_ref()
                .map(|s| mapping::sandbox_config(s, &rt.options)),
        },
        None,
    );
    match rt
        .call(
            ctx("PullImage", "image", &request.image),
            None,
            client.pull_image(req),
        )
        .await
    {
        Ok(resp) => Ok(resp.image_ref),
        Err(e @ (RuntimeError::Unavailable(_) | RuntimeError::DeadlineExceeded { .. })) => Err(e),
        Err(RuntimeError::NotFound { .. }) => Err(RuntimeError::ImagePull {
            image: request.image.clone(),
            message: "image not found".into(),
        }),
        Err(
            RuntimeError::OperationFailed { message, .. }
            | RuntimeError::InvalidInput { message, .. },
        ) => Err(RuntimeError::ImagePull {
            image: request.image.clone(),
            message,
        }),
        Err(e) => Err(RuntimeError::ImagePull {
            image: request.image.clone(),
            message: e.to_string(),
        }),
    }
}

/// `ListImages`.
pub(crate) async fn list(rt: &CriRuntime) -> RuntimeResult<Vec<ImageInfo>> {
    let mut client = rt.images.clone();
    let req = rt.request(cri::ListImagesRequest { filter: None }, rt.deadline());
    let resp = rt
        .call(
            ctx("ListImages", "image", ""),
            rt.deadline(),
            client.list_images(req),
        )
        .await?;
    Ok(resp.images.into_iter().map(image_info).collect())
}

/// `RemoveImage`.
pub(crate) async fn remove(rt: &CriRuntime, image: &str) -> RuntimeResult<()> {
    let mut client = rt.images.clone();
    let req = rt.request(
        cri::RemoveImageRequest {
            image: Some(cri::ImageSpec {
                image: image.to_string(),
                ..Default::default()
            }),
        },
        rt.deadline(),
    );
    rt.call(
        ctx("RemoveImage", "image", image),
        rt.deadline(),
        client.remove_image(req),
    )
    .await?;
    Ok(())
}

/// The filesystems images (and container layers) are stored on.
pub(crate) async fn fs_info(rt: &CriRuntime) -> RuntimeResult<ImageFsInfo> {
    let mut client = rt.images.clone();
    let req = rt.request(cri::ImageFsInfoRequest {}, rt.deadline());
    let resp = rt
        .call(
            ctx("ImageFsInfo", "image", ""),
            rt.deadline(),
            client.image_fs_info(req),
        )
        .await?;
    Ok(mapping::image_fs_info(&resp))
}
