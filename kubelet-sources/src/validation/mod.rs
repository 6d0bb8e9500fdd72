//! Static pod validation: what the API server's `ValidatePodCreate` (Go's
//! `pkg/apis/core/validation`) checks, applied by the kubelet to pods from files and URLs,
//! which never pass through an API server (Go's `pkg/kubelet/config/common.go` calls the
//! same function on the defaulted pod).
//!
//! Every problem is a [`FieldError`] with Go's field path and message format
//! (`spec.containers[0].image: Required value`, `metadata.name: Invalid value: "A": …`), and
//! every problem is reported, not only the first. The rules are split by area:
//! [`names`] (DNS names, qualified names, label values, env names, port names), [`meta`]
//! (object meta: names, labels, annotations and their total size), [`volumes`] (volume names,
//! sources and paths), [`containers`] (containers, init and ephemeral containers: ports, env,
//! mounts, probes, lifecycle, resources, security context) and [`spec`] (the pod spec's own
//! fields: restart and DNS policies, host aliases, tolerations, affinity, topology spread, the
//! pod security context).

pub mod containers;
pub mod meta;
pub mod names;
pub mod spec;
pub mod volumes;

use std::fmt;

use k8s_openapi::api::core::v1::Pod;

/// The kind of a [`FieldError`], as Go's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// "Required value"
    Required,
    /// "Invalid value"
    Invalid,
    /// "Unsupported value"
    NotSupported,
    /// "Duplicate value"
    Duplicate,
    /// "Not found"
    NotFound,
    /// "Forbidden"
    Forbidden,
    /// "Too long"
    TooLong,
    /// "Too many"
    TooMany,
}

impl ErrorKind {
    /// Go's text for the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Required => "Required value",
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::NotFound => "Not found",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
        }
    }
}

/// A value named in an error, printed as Go prints it (strings quoted, numbers bare).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadValue {
    /// A string (printed with quotes and escapes, like Go's `%q`).
    Str(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// Anything else, already formatted.
    Other(String),
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadValue::Str(s) => write!(f, "{s:?}"),
            BadValue::Int(i) => write!(f, "{i}"),
            BadValue::Bool(b) => write!(f, "{b}"),
            BadValue::Other(s) => f.write_str(s),
        }
    }
}

impl From<&str> for BadValue {
    fn from(s: &str) -> Self {
        BadValue::Str(s.to_string())
    }
}

impl From<&String> for BadValue {
    fn from(s: &String) -> Self {
        BadValue::Str(s.clone())
    }
}

impl From<String> for BadValue {
    fn from(s: String) -> Self {
        BadValue::Str(s)
    }
}

impl From<i64> for BadValue {
    fn from(i: i64) -> Self {
        BadValue::Int(i)
    }
}

impl From<i32> for BadValue {
    fn from(i: i32) -> Self {
        BadValue::Int(i64::from(i))
    }
}

impl From<bool> for BadValue {
    fn from(b: bool) -> Self {
        BadValue::Bool(b)
    }
}

/// Longest value text printed in an error (a 3 MB annotation is not repeated in the log).
const MAX_PRINTED_VALUE: usize = 256;

/// One validation problem: the field's path, what is wrong and (for most kinds) the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The kind.
    pub kind: ErrorKind,
    /// The field's path, like `spec.containers[0].image`.
    pub field: String,
    /// The offending value (printed for the kinds Go prints it for).
    pub value: Option<BadValue>,
    /// More detail ("" for none).
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.kind.as_str())?;
        let prints_value = !matches!(
            self.kind,
            ErrorKind::Required | ErrorKind::Forbidden | ErrorKind::TooLong | ErrorKind::TooMany
        );
        if let (true, Some(v)) = (prints_value, &self.value) {
            let text = v.to_string();
            if text.len() > MAX_PRINTED_VALUE {
                let mut end = MAX_PRINTED_VALUE;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                write!(f, ": {}...", &text[..end])?;
            } else {
                write!(f, ": {text}")?;
            }
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl FieldError {
    /// Go's `field.Required`.
    pub fn required(field: &Path, detail: &str) -> FieldError {
        FieldError::new(ErrorKind::Required, field, None, detail)
    }

    /// Go's `field.Invalid`.
    pub fn invalid(field: &Path, value: impl Into<BadValue>, detail: &str) -> FieldError {
        FieldError::new(ErrorKind::Invalid, field, Some(value.into()), detail)
    }

    /// Go's `field.NotSupported`: `detail` lists the supported values.
    pub fn not_supported(field: &Path, value: impl Into<BadValue>, valid: &[&str]) -> FieldError {
        let quoted: Vec<String> = valid.iter().map(|v| format!("{v:?}")).collect();
        let detail = format!("supported values: {}", quoted.join(", "));
        FieldError::new(ErrorKind::NotSupported, field, Some(value.into()), &detail)
    }

    /// Go's `field.Duplicate`.
    pub fn duplicate(field: &Path, value: impl Into<BadValue>) -> FieldError {
        FieldError::new(ErrorKind::Duplicate, field, Some(value.into()), "")
    }

    /// Go's `field.NotFound`.
    pub fn not_found(field: &Path, value: impl Into<BadValue>) -> FieldError {
        FieldError::new(ErrorKind::NotFound, field, Some(value.into()), "")
    }

    /// Go's `field.Forbidden`.
    pub fn forbidden(field: &Path, detail: &str) -> FieldError {
        FieldError::new(ErrorKind::Forbidden, field, None, detail)
    }

    /// Go's `field.TooLong` (`must have at most N bytes`).
    pub fn too_long(field: &Path, max: usize) -> FieldError {
        let detail = format!("must have at most {max} bytes");
        FieldError::new(ErrorKind::TooLong, field, None, &detail)
    }

    /// Go's `field.TooMany` (`must have at most N items`).
    pub fn too_many(field: &Path, max: usize) -> FieldError {
        let detail = format!("must have at most {max} items");
        FieldError::new(ErrorKind::TooMany, field, None, &detail)
    }

    fn new(kind: ErrorKind, field: &Path, value: Option<BadValue>, detail: &str) -> FieldError {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            detail: detail.to_string(),
        }
    }
}

/// A field path being built (`spec`, `.containers`, `[0]`, `.image`), as Go's `field.Path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    /// The root path `name`.
    pub fn new(name: &str) -> Path {
        Path(name.to_string())
    }

    /// `self.name`.
    pub fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// `self[i]`.
    pub fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    /// `self[key]` (a map key).
    pub fn key(&self, key: &str) -> Path {
        Path(format!("{}[{key}]", self.0))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A list of problems found so far.
pub type ErrorList = Vec<FieldError>;

/// Validates a (defaulted) static pod as the API server validates a pod create. An empty list
/// means the pod is valid.
pub fn validate_pod_create(pod: &Pod) -> ErrorList {
    let mut errs = meta::validate_object_meta(&pod.metadata, &Path::new("metadata"));
    let spec_path = Path::new("spec");
    match pod.spec.as_ref() {
        None => errs.push(FieldError::required(&spec_path, "")),
        Some(spec) => errs.extend(spec::validate_pod_spec(spec, &pod.metadata, &spec_path)),
    }
    errs
}

/// Go's `ValidateNonnegativeField`.
pub(crate) fn nonnegative(v: i64, path: &Path, errs: &mut ErrorList) {
    if v < 0 {
        errs.push(FieldError::invalid(
            path,
            v,
            "must be greater than or equal to 0",
        ));
    }
}

#[cfg(test)]
mod tests;
