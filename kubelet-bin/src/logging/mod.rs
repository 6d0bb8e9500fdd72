//! The binary's log output, configured as the Go kubelet's is: `logging` of the configuration
//! (format, `-v`, `--vmodule`, split streams; [`crate::config::logging`]) and klog's flags
//! that Go 1.25 still had (`--logtostderr`, `--alsologtostderr`, `--log-file`,
//! `--log-file-max-size`, `--stderrthreshold`, `--skip-headers`, `--skip-log-headers`).
//!
//! - [`vmodule`]: which lines are shown (per module verbosity).
//! - [`sink`]: where they go (standard error, split streams, a size-capped file).
//! - The format: component-base's JSON ([`crate::json_log`]) or text (`tracing`'s, without
//!   its time, level and module with `--skip-headers`). kubelet-rs writes no header at the top
//!   of a log file, what `--skip-log-headers` asks of klog.
//!
//! `RUST_LOG`, when set, replaces the verbosity filter (for debugging kubelet-rs itself).

pub mod sink;
pub mod vmodule;

use std::path::PathBuf;

use clap::ArgMatches;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::logging::{Logging, VModuleItem};
use crate::flags::FlagValueError;
use crate::go_flags::parse_go_bool;
use sink::{Destination, Sink};

/// klog's flags kubelet-rs acts on, as given (klog's defaults otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KlogFlags {
    /// `--logtostderr` (default true).
    pub logtostderr: bool,
    /// `--alsologtostderr`.
    pub alsologtostderr: bool,
    /// `--log-file`.
    pub log_file: Option<PathBuf>,
    /// `--log-file-max-size` in MB (default 1800; 0: no limit).
    pub log_file_max_size_mb: u64,
    /// `--stderrthreshold` (default ERROR, 2).
    pub stderr_threshold: i32,
    /// `--skip-headers`.
    pub skip_headers: bool,
}

impl Default for KlogFlags {
    fn default() -> Self {
        KlogFlags {
            logtostderr: true,
            alsologtostderr: false,
            log_file: None,
            log_file_max_size_mb: 1800,
            stderr_threshold: 2,
            skip_headers: false,
        }
    }
}

/// The value of a [`crate::go_flags`] flag given on the command line (the last one).
fn given<'a>(m: &'a ArgMatches, name: &str) -> Option<&'a String> {
    m.try_get_many::<String>(name).ok().flatten()?.next_back()
}

impl KlogFlags {
    /// Reads the flags from the command line (registered by [`crate::go_flags::register`]).
    pub fn from_matches(m: &ArgMatches) -> Result<KlogFlags, FlagValueError> {
        let mut k = KlogFlags::default();
        let bool_flag = |name: &'static str, default: bool| match given(m, name) {
            Some(v) => parse_go_bool(name, v),
            None => Ok(default),
        };
        k.logtostderr = bool_flag("logtostderr", true)?;
        k.alsologtostderr = bool_flag("alsologtostderr", false)?;
        k.skip_headers = bool_flag("skip-headers", false)?;
        k.log_file = given(m, "log-file")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        if let Some(v) = given(m, "log-file-max-size") {
            k.log_file_max_size_mb = v.parse().map_err(|_| FlagValueError {
                flag: "log-file-max-size",
                value: v.clone(),
                reason: "not a number of megabytes".into(),
            })?;
        }
        if let Some(v) = given(m, "stderrthreshold") {
            k.stderr_threshold = sink::parse_severity(v).ok_or_else(|| FlagValueError {
                flag: "stderrthreshold",
                value: v.clone(),
                reason: "not a severity (INFO, WARNING, ERROR, FATAL or a number)".into(),
            })?;
        }
        Ok(k)
    }
}

/// Everything the log layer is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// `text` or `json`.
    pub format: String,
    /// `-v` (`logging.verbosity`).
    pub verbosity: u32,
    /// `--vmodule` (`logging.vmodule`).
    pub vmodule: Vec<VModuleItem>,
    /// Where lines go.
    pub destination: Destination,
    /// `--skip-headers`: text lines without time, level and module.
    pub skip_headers: bool,
}

impl LogSettings {
    /// The settings of a configuration's `logging` and klog's flags, with a warning for
    /// each flag that has no effect (as in klog) in the combination given.
    pub fn new(logging: &Logging, klog: &KlogFlags) -> (LogSettings, Vec<String>) {
        let mut warnings = Vec::new();
        let destination = match (&klog.log_file, klog.logtostderr) {
            (Some(path), false) => {
                if logging.split_stream() {
                    warnings.push(format!(
                        "logging.options.{}.splitStream has no effect with --log-file: kubelet-rs writes every line to the file",
                        logging.format
                    ));
                }
                Destination::File {
                    path: path.clone(),
                    max_bytes: klog.log_file_max_size_mb.saturating_mul(1024 * 1024),
                    stderr_threshold: klog.stderr_threshold,
                    also_to_stderr: klog.alsologtostderr,
                }
            }
            (file, to_stderr) => {
                if file.is_some() && to_stderr {
                    warnings.push(
                        "--log-file has no effect with --logtostderr=true (as in klog): lines go to standard error"
                            .to_string(),
                    );
                }
                if file.is_none() && !to_stderr {
                    warnings.push(
                        "--logtostderr=false without --log-file: kubelet-rs does not write klog's per-severity files (--log-dir); lines go to standard error"
                            .to_string(),
                    );
                }
                Destination::Stderr {
                    split_stream: logging.split_stream(),
                }
            }
        };
        let settings = LogSettings {
            format: logging.format.clone(),
            verbosity: logging.verbosity,
            vmodule: logging.vmodule.clone(),
            destination,
            skip_headers: klog.skip_headers,
        };
        (settings, warnings)
    }

    /// The `tracing` layer writing the lines: filtered, formatted and routed as set.
    pub fn layer<S>(&self) -> std::io::Result<Box<dyn Layer<S> + Send + Sync>>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let sink = Sink::open(self.destination.clone())?;
        let to_terminal = matches!(self.destination, Destination::Stderr { .. })
            && std::io::IsTerminal::is_terminal(&std::io::stderr());
        let fmt = tracing_subscriber::fmt::layer().with_writer(sink);
        let fmt: Box<dyn Layer<S> + Send + Sync> = if self.format == "json" {
            fmt.event_format(crate::json_log::ComponentBaseJson).boxed()
        } else if self.skip_headers {
            fmt.with_ansi(false)
                .without_time()
                .with_level(false)
                .with_target(false)
                .boxed()
        } else {
            fmt.with_ansi(to_terminal).boxed()
        };
        Ok(match EnvFilter::try_from_default_env() {
            Ok(env) => fmt.with_filter(env).boxed(),
            Err(_) => {
                let (v, vmodule) = (self.verbosity, self.vmodule.clone());
                fmt.with_filter(tracing_subscriber::filter::filter_fn(move |meta| {
                    let target = meta.target();
                    let level = vmodule::verbosity_for(v, &vmodule, target);
                    *meta.level() <= vmodule::max_level(level, target)
                }))
                .boxed()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn klog_destinations_and_their_no_effect_warnings() {
        let logging = Logging::default();
        let (s, w) = LogSettings::new(&logging, &KlogFlags::default());
        assert_eq!(
            s.destination,
            Destination::Stderr {
                split_stream: false
            }
        );
        assert!(w.is_empty());
        let file = KlogFlags {
            log_file: Some("/var/log/kubelet.log".into()),
            ..KlogFlags::default()
        };
        let (s, w) = LogSettings::new(&logging, &file);
        assert!(matches!(s.destination, Destination::Stderr { .. }));
        assert_eq!(w.len(), 1, "{w:?}");
        let (s, w) = LogSettings::new(
            &logging,
            &KlogFlags {
                logtostderr: false,
                log_file_max_size_mb: 2,
                ..file.clone()
            },
        );
        assert_eq!(
            s.destination,
            Destination::File {
                path: "/var/log/kubelet.log".into(),
                max_bytes: 2 * 1024 * 1024,
                stderr_threshold: 2,
                also_to_stderr: false,
            }
        );
        assert!(w.is_empty());
        let (_, w) = LogSettings::new(
            &logging,
            &KlogFlags {
                logtostderr: false,
                ..KlogFlags::default()
            },
        );
        assert_eq!(w.len(), 1, "{w:?}");
        let mut split = Logging::default();
        split.options.text.split_stream = true;
        let (s, _) = LogSettings::new(&split, &KlogFlags::default());
        assert_eq!(s.destination, Destination::Stderr { split_stream: true });
    }
}
