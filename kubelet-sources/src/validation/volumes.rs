//! Volumes (Go's `ValidateVolumes` and `validateVolumeSource`): DNS-1123 label names, unique,
//! exactly one source, and each source's own rules — host paths without `..`, emptyDir size
//! limits, key-to-path items and downward API files as relative paths that never step out of
//! the volume, projected sources, token expirations.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    DownwardAPIVolumeFile, KeyToPath, ObjectFieldSelector, Volume, VolumeProjection,
};

use super::names;
use super::{ErrorList, FieldError, Path};

const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";
const ONE_TYPE: &str = "may not specify more than 1 volume type";

/// The volumes that passed, by name (for volume mount checks), and the errors of the rest.
pub fn validate_volumes<'a>(
    volumes: &'a [Volume],
    path: &Path,
    errs: &mut ErrorList,
) -> BTreeMap<&'a str, &'a Volume> {
    let mut valid = BTreeMap::new();
    for (i, vol) in volumes.iter().enumerate() {
        let idx = path.index(i);
        let name_path = idx.child("name");
        let mut el = validate_volume_source(vol, &idx);
        if vol.name.is_empty() {
            el.push(FieldError::required(&name_path, ""));
        } else {
            for msg in names::dns1123_label(&vol.name) {
                el.push(FieldError::invalid(&name_path, &vol.name, &msg));
            }
        }
        if valid.contains_key(vol.name.as_str()) {
            el.push(FieldError::duplicate(&name_path, &vol.name));
        }
        if el.is_empty() {
            valid.insert(vol.name.as_str(), vol);
        } else {
            errs.extend(el);
        }
    }
    valid
}

/// The sources set on a volume, in Go's order of checking.
fn sources(v: &Volume) -> Vec<&'static str> {
    let mut out = Vec::new();
    macro_rules! check {
        ($($field:ident => $name:literal),* $(,)?) => {
            $( if v.$field.is_some() { out.push($name); } )*
        };
    }
    check! {
        empty_dir => "emptyDir",
        host_path => "hostPath",
        git_repo => "gitRepo",
        gce_persistent_disk => "gcePersistentDisk",
        aws_elastic_block_store => "awsElasticBlockStore",
        secret => "secret",
        nfs => "nfs",
        iscsi => "iscsi",
        glusterfs => "glusterfs",
        flocker => "flocker",
        persistent_volume_claim => "persistentVolumeClaim",
        rbd => "rbd",
        quobyte => "quobyte",
        cinder => "cinder",
        cephfs => "cephfs",
        downward_api => "downwardAPI",
        fc => "fc",
        azure_file => "azureFile",
        flex_volume => "flexVolume",
        azure_disk => "azureDisk",
        vsphere_volume => "vsphereVolume",
        photon_persistent_disk => "photonPersistentDisk",
        portworx_volume => "portworxVolume",
        scale_io => "scaleIO",
        config_map => "configMap",
        storageos => "storageos",
        projected => "projected",
        csi => "csi",
        ephemeral => "ephemeral",
        image => "image",
    }
    out
}

fn validate_volume_source(v: &Volume, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let set = sources(v);
    let Some(first) = set.first() else {
        errs.push(FieldError::required(path, "must specify a volume type"));
        return errs;
    };
    for extra in &set[1..] {
        errs.push(FieldError::forbidden(&path.child(extra), ONE_TYPE));
    }
    let p = path.child(first);
    match *first {
        "emptyDir" => {
            let size = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref());
            if let Some(q) = size {
                if kubelet_core::resources::value(q).is_ok_and(|n| n < 0) {
                    errs.push(FieldError::forbidden(
                        &p.child("sizeLimit"),
                        "SizeLimit field must be a valid resource quantity",
                    ));
                } else if let Err(e) = kubelet_core::resources::value(q) {
                    errs.push(FieldError::invalid(&p.child("sizeLimit"), &q.0, e.detail()));
                }
            }
        }
        "hostPath" => {
            if let Some(h) = v.host_path.as_ref() {
                if h.path.is_empty() {
                    errs.push(FieldError::required(&p.child("path"), ""));
                } else {
                    no_backsteps(&h.path, &p.child("path"), &mut errs);
                    if let Some(t) = h.type_.as_deref() {
                        const TYPES: [&str; 8] = [
                            "",
                            "BlockDevice",
                            "CharDevice",
                            "Directory",
                            "DirectoryOrCreate",
                            "File",
                            "FileOrCreate",
                            "Socket",
                        ];
                        if !TYPES.contains(&t) {
                            errs.push(FieldError::not_supported(&p.child("type"), t, &TYPES));
                        }
                    }
                }
            }
        }
        "secret" => {
            if let Some(s) = v.secret.as_ref() {
                if s.secret_name.as_deref().unwrap_or("").is_empty() {
                    errs.push(FieldError::required(&p.child("secretName"), ""));
                }
                file_mode(s.default_mode, &p.child("defaultMode"), &mut errs);
                key_to_paths(s.items.iter().flatten(), &p.child("items"), &mut errs);
            }
        }
        "configMap" => {
            if let Some(c) = v.config_map.as_ref() {
                if c.name.is_empty() {
                    errs.push(FieldError::required(&p.child("name"), ""));
                }
                file_mode(c.default_mode, &p.child("defaultMode"), &mut errs);
                key_to_paths(c.items.iter().flatten(), &p.child("items"), &mut errs);
            }
        }
        "downwardAPI" => {
            if let Some(d) = v.downward_api.as_ref() {
                file_mode(d.default_mode, &p.child("defaultMode"), &mut errs);
                for (i, f) in d.items.iter().flatten().enumerate() {
                    downward_file(f, &p.child("items").index(i), &mut errs);
                }
            }
        }
        "projected" => {
            if let Some(pr) = v.projected.as_ref() {
                file_mode(pr.default_mode, &p.child("defaultMode"), &mut errs);
                let mut paths = BTreeSet::new();
                for (i, s) in pr.sources.iter().flatten().enumerate() {
                    projection(s, &p.child("sources").index(i), &mut paths, &mut errs);
                }
            }
        }
        "nfs" => {
            if let Some(n) = v.nfs.as_ref() {
                if n.server.is_empty() {
                    errs.push(FieldError::required(&p.child("server"), ""));
                }
                if n.path.is_empty() {
                    errs.push(FieldError::required(&p.child("path"), ""));
                } else if !n.path.starts_with('/') {
                    errs.push(FieldError::invalid(
                        &p.child("path"),
                        &n.path,
                        "must be an absolute path",
                    ));
                }
            }
        }
        "persistentVolumeClaim" => {
            if let Some(c) = v.persistent_volume_claim.as_ref() {
                if c.claim_name.is_empty() {
                    errs.push(FieldError::required(&p.child("claimName"), ""));
                }
            }
        }
        "gitRepo" => {
            if let Some(g) = v.git_repo.as_ref() {
                if g.repository.is_empty() {
                    errs.push(FieldError::required(&p.child("repository"), ""));
                }
                if let Some(d) = g.directory.as_deref() {
                    local_descending(d, &p.child("directory"), &mut errs);
                }
            }
        }
        _ => {}
    }
    errs
}

fn file_mode(mode: Option<i32>, path: &Path, errs: &mut ErrorList) {
    if let Some(m) = mode {
        if !(0..=0o777).contains(&m) {
            errs.push(FieldError::invalid(path, m, FILE_MODE_ERROR));
        }
    }
}

fn key_to_paths<'a>(items: impl Iterator<Item = &'a KeyToPath>, path: &Path, errs: &mut ErrorList) {
    for (i, kp) in items.enumerate() {
        let idx = path.index(i);
        if kp.key.is_empty() {
            errs.push(FieldError::required(&idx.child("key"), ""));
        }
        if kp.path.is_empty() {
            errs.push(FieldError::required(&idx.child("path"), ""));
        }
        local_non_reserved(&kp.path, &idx.child("path"), errs);
        file_mode(kp.mode, &idx.child("mode"), errs);
    }
}

/// Go's `validatePathNoBacksteps`: no `..` element.
pub fn no_backsteps(target: &str, path: &Path, errs: &mut ErrorList) {
    if target.split('/').any(|part| part == "..") {
        errs.push(FieldError::invalid(path, target, "must not contain '..'"));
    }
}

/// Go's `validateLocalDescendingPath`: relative, no `..` element.
pub fn local_descending(target: &str, path: &Path, errs: &mut ErrorList) {
    if target.starts_with('/') {
        errs.push(FieldError::invalid(path, target, "must be a relative path"));
    }
    no_backsteps(target, path, errs);
}

/// Go's `ValidateLocalNonReservedPath`: a local descending path not starting with `..`.
pub fn local_non_reserved(target: &str, path: &Path, errs: &mut ErrorList) {
    local_descending(target, path, errs);
    if target.starts_with("..") && !target.starts_with("../") {
        errs.push(FieldError::invalid(
            path,
            target,
            "must not start with '..'",
        ));
    }
}

const DOWNWARD_VOLUME_FIELDS: [&str; 5] = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

fn downward_file(f: &DownwardAPIVolumeFile, path: &Path, errs: &mut ErrorList) {
    if f.path.is_empty() {
        errs.push(FieldError::required(&path.child("path"), ""));
    }
    local_non_reserved(&f.path, &path.child("path"), errs);
    file_mode(f.mode, &path.child("mode"), errs);
    match (&f.field_ref, &f.resource_field_ref) {
        (Some(r), None) => {
            field_selector(r, &DOWNWARD_VOLUME_FIELDS, &path.child("fieldRef"), errs)
        }
        (None, Some(r)) => {
            super::containers::resource_field_selector(r, &path.child("resourceFieldRef"), errs)
        }
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            "resource",
            "fieldRef and resourceFieldRef can not be specified simultaneously",
        )),
        (None, None) => errs.push(FieldError::required(
            path,
            "one of fieldRef and resourceFieldRef is required",
        )),
    }
}

/// Go's `validateObjectFieldSelector`: an API version (v1 when empty, as defaulted) and one of
/// the supported field paths, or a subscripted `metadata.labels['k']`/`annotations['k']`.
pub fn field_selector(
    r: &ObjectFieldSelector,
    supported: &[&str],
    path: &Path,
    errs: &mut ErrorList,
) {
    let fp = path.child("fieldPath");
    if let Some(v) = r
        .api_version
        .as_deref()
        .filter(|v| !v.is_empty() && *v != "v1")
    {
        errs.push(FieldError::not_supported(
            &path.child("apiVersion"),
            v,
            &["v1"],
        ));
        return;
    }
    if r.field_path.is_empty() {
        errs.push(FieldError::required(&fp, ""));
        return;
    }
    let subscripted = ["metadata.annotations", "metadata.labels"]
        .iter()
        .find_map(|prefix| {
            r.field_path
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix("['"))
                .and_then(|rest| rest.strip_suffix("']"))
                .map(|key| (*prefix, key))
        });
    match subscripted {
        Some((_, key)) => {
            for msg in names::qualified_name(&key.to_lowercase()) {
                errs.push(FieldError::invalid(&fp, key, &msg));
            }
        }
        None if supported.contains(&r.field_path.as_str()) => {}
        None => errs.push(FieldError::not_supported(&fp, &r.field_path, supported)),
    }
}

fn projection(
    s: &VolumeProjection,
    path: &Path,
    paths: &mut BTreeSet<String>,
    errs: &mut ErrorList,
) {
    let mut set = Vec::new();
    if s.secret.is_some() {
        set.push("secret");
    }
    if s.config_map.is_some() {
        set.push("configMap");
    }
    if s.downward_api.is_some() {
        set.push("downwardAPI");
    }
    if s.service_account_token.is_some() {
        set.push("serviceAccountToken");
    }
    if s.cluster_trust_bundle.is_some() {
        set.push("clusterTrustBundle");
    }
    if s.pod_certificate.is_some() {
        set.push("podCertificate");
    }
    if set.is_empty() {
        errs.push(FieldError::required(
            path,
            "must specify exactly 1 volume type",
        ));
        return;
    }
    for extra in &set[1..] {
        errs.push(FieldError::forbidden(&path.child(extra), ONE_TYPE));
    }
    let mut claim = |p: &str, at: &Path, errs: &mut ErrorList| {
        if !paths.insert(p.to_string()) {
            errs.push(FieldError::invalid(at, p, "conflicting duplicate paths"));
        }
    };
    if let Some(sec) = s.secret.as_ref() {
        let items = path.child("secret").child("items");
        key_to_paths(sec.items.iter().flatten(), &items, errs);
        for (i, kp) in sec.items.iter().flatten().enumerate() {
            claim(&kp.path, &items.index(i).child("path"), errs);
        }
    }
    if let Some(cm) = s.config_map.as_ref() {
        let items = path.child("configMap").child("items");
        key_to_paths(cm.items.iter().flatten(), &items, errs);
        for (i, kp) in cm.items.iter().flatten().enumerate() {
            claim(&kp.path, &items.index(i).child("path"), errs);
        }
    }
    if let Some(d) = s.downward_api.as_ref() {
        let items = path.child("downwardAPI").child("items");
        for (i, f) in d.items.iter().flatten().enumerate() {
            downward_file(f, &items.index(i), errs);
            claim(&f.path, &items.index(i).child("path"), errs);
        }
    }
    if let Some(t) = s.service_account_token.as_ref() {
        let tp = path.child("serviceAccountToken");
        if let Some(exp) = t.expiration_seconds {
            if exp < 600 {
                errs.push(FieldError::invalid(
                    &tp.child("expirationSeconds"),
                    exp,
                    "may not specify a duration less than 10 minutes",
                ));
            } else if exp > 1 << 32 {
                errs.push(FieldError::invalid(
                    &tp.child("expirationSeconds"),
                    exp,
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
        }
        if t.path.is_empty() {
            errs.push(FieldError::required(&tp.child("path"), ""));
        }
        local_non_reserved(&t.path, &tp.child("path"), errs);
        claim(&t.path, &tp.child("path"), errs);
    }
}
