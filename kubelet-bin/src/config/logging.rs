//! `logging` of the kubelet configuration: component-base's `LoggingConfiguration` (format,
//! verbosity, per-file verbosity, the formats' stream options), with Go's defaults and
//! validation. How the binary acts on it is [`crate::logging`].

use serde::{Deserialize, Serialize};

use super::duration::GoDuration;

/// The most `--vmodule` / `logging.vmodule` entries (a bound on what each log callsite
/// is matched against).
pub const MAX_VMODULE_ENTRIES: usize = 64;

/// The largest verbosity component-base accepts (it must fit an `int32`).
pub const MAX_VERBOSITY: u32 = 2_147_483_647;

/// `logging.options.json` and `logging.options.text`: split streams and buffering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamOptions {
    /// Errors to stderr, the rest to stdout.
    #[serde(rename = "splitStream")]
    pub split_stream: bool,
    /// The info stream's buffer (a quantity, `0`: unbuffered).
    #[serde(rename = "infoBufferSize")]
    pub info_buffer_size: String,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            split_stream: false,
            info_buffer_size: "0".into(),
        }
    }
}

/// `logging.options`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct LoggingOptions {
    /// The JSON format's options (`--log-json-*`).
    pub json: StreamOptions,
    /// The text format's options (`--log-text-*`, Go 1.28+).
    pub text: StreamOptions,
}

/// One `logging.vmodule` entry (`--vmodule=pattern=N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VModuleItem {
    /// A file pattern: a name or a glob (`*`, `?`, `[…]`). See [`crate::logging::vmodule`].
    #[serde(rename = "filePattern")]
    pub file_pattern: String,
    /// The verbosity for the matching files.
    pub verbosity: u32,
}

/// `logging` (component-base's `LoggingConfiguration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Logging {
    /// `--logging-format`: `text` (default) or `json`.
    pub format: String,
    /// `--log-flush-frequency` (default 5s). kubelet-rs writes every line unbuffered, so
    /// there is nothing to flush.
    #[serde(rename = "flushFrequency")]
    pub flush_frequency: GoDuration,
    /// The verbosity (`-v` on the command line wins).
    pub verbosity: u32,
    /// Per-file verbosity (`--vmodule`), first match wins.
    pub vmodule: Vec<VModuleItem>,
    /// Format options.
    pub options: LoggingOptions,
}

impl Default for Logging {
    fn default() -> Self {
        Logging {
            format: "text".into(),
            flush_frequency: GoDuration::from_secs(5),
            verbosity: 0,
            vmodule: Vec::new(),
            options: LoggingOptions::default(),
        }
    }
}

impl Logging {
    /// Whether errors go to stderr and the rest to stdout (the current format's
    /// `splitStream`).
    pub fn split_stream(&self) -> bool {
        match self.format.as_str() {
            "json" => self.options.json.split_stream,
            _ => self.options.text.split_stream,
        }
    }

    /// component-base's `ValidateAndApply` checks, as `(field, reason)` pairs in Go's words;
    /// `alpha_options`: the `LoggingAlphaOptions` gate (split streams and info buffers).
    pub fn validate(&self, alpha_options: bool) -> Vec<(String, String)> {
        let mut errs = Vec::new();
        match self.format.as_str() {
            "text" | "json" => {}
            other => errs.push((
                "logging.format".to_string(),
                format!("unsupported value {other:?} (supported: text, json)"),
            )),
        }
        if self.verbosity > MAX_VERBOSITY {
            errs.push((
                "logging.verbosity".into(),
                format!(
                    "Invalid value: {}: Must be <= {MAX_VERBOSITY}",
                    self.verbosity
                ),
            ));
        }
        if self.format != "text" && !self.vmodule.is_empty() {
            errs.push((
                "logging.vmodule".into(),
                "Forbidden: Only supported for text log format".into(),
            ));
        }
        if self.vmodule.len() > MAX_VMODULE_ENTRIES {
            errs.push((
                "logging.vmodule".into(),
                format!("more than {MAX_VMODULE_ENTRIES} entries"),
            ));
        }
        for (i, item) in self.vmodule.iter().enumerate() {
            let field = format!("logging.vmodule[{i}]");
            let p = &item.file_pattern;
            if p.is_empty() {
                errs.push((
                    field.clone(),
                    "Required value: File pattern must not be empty".into(),
                ));
            }
            if p.contains(['=', ',']) {
                errs.push((
                    field.clone(),
                    format!(
                        "Invalid value: {p:?}: File pattern must not contain equal sign or comma"
                    ),
                ));
            }
            if item.verbosity > MAX_VERBOSITY {
                errs.push((
                    field,
                    format!(
                        "Invalid value: {}: Must be <= {MAX_VERBOSITY}",
                        item.verbosity
                    ),
                ));
            }
        }
        if !alpha_options {
            for (format, o) in [("json", &self.options.json), ("text", &self.options.text)] {
                let forbidden = "Forbidden: Feature LoggingAlphaOptions is disabled".to_string();
                if o.split_stream {
                    errs.push((
                        format!("logging.options.{format}.splitStream"),
                        forbidden.clone(),
                    ));
                }
                if o.info_buffer_size != "0" {
                    errs.push((
                        format!("logging.options.{format}.infoBufferSize"),
                        forbidden,
                    ));
                }
            }
        }
        errs
    }
}
