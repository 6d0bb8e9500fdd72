//! `--logging-format=json` (`logging.format: json`): one JSON object per line, in the schema
//! of component-base's JSON logger, so a log shipper configured for the Go kubelet's JSON
//! parses kubelet-rs's lines:
//! `{"ts":1733389200.123456,"caller":"sync/mod.rs:225","msg":"…","v":0,"pod":"ns/name",…}`
//! - `ts`: Unix seconds, with microseconds;
//! - `caller`: the source file's last directory and name, and the line;
//! - `msg`: the message;
//! - `v`: the verbosity of an info line (info 0, debug 4, trace 6; the levels `-v` maps to) —
//!   error lines have none, as Go's `ErrorS`; a warning is an info line at 0 (Go's
//!   structured logging has no warning level);
//! - then the event's fields in the order written, an `error` field as Go's `err`.
//!   Numbers and booleans stay JSON numbers and booleans; everything else is a string.
//!
//! Fields of the spans an event is in are not repeated on it (the kubelet's events carry
//! `pod`/`uid` themselves).

use std::fmt;

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The event formatter (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct ComponentBaseJson;

/// An event's fields in the order they were recorded; `message` apart.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    fields: Vec<(String, Value)>,
}

impl Fields {
    fn push(&mut self, field: &Field, value: Value) {
        match field.name() {
            "message" => {
                self.message = match value {
                    Value::String(s) => s,
                    other => other.to_string(),
                }
            }
            "error" => self.fields.push(("err".into(), value)),
            name => self.fields.push((name.to_string(), value)),
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, Value::String(value.to_string()));
    }
}

/// The verbosity of an info line at `level` (`None`: an error line).
fn verbosity(level: &Level) -> Option<u8> {
    match *level {
        Level::ERROR => None,
        Level::WARN | Level::INFO => Some(0),
        Level::DEBUG => Some(4),
        Level::TRACE => Some(6),
    }
}

/// `dir/file.rs:line` of a source path.
fn caller(file: Option<&str>, line: Option<u32>) -> String {
    let file = file.unwrap_or("?");
    let mut parts = file.rsplitn(3, '/');
    let name = parts.next().unwrap_or(file);
    let short = match parts.next() {
        Some(dir) => format!("{dir}/{name}"),
        None => name.to_string(),
    };
    format!("{short}:{}", line.unwrap_or(0))
}

/// One line (without the newline) for an event at `level` from `file:line` at `ts` (Unix
/// seconds).
fn render(ts: f64, level: &Level, file: Option<&str>, line: Option<u32>, f: &Fields) -> String {
    let string = |s: &str| Value::String(s.to_string()).to_string();
    let mut out = format!(
        "{{\"ts\":{ts:.6},\"caller\":{},\"msg\":{}",
        string(&caller(file, line)),
        string(&f.message)
    );
    if let Some(v) = verbosity(level) {
        out.push_str(&format!(",\"v\":{v}"));
    }
    for (k, v) in &f.fields {
        out.push_str(&format!(",{}:{v}", string(k)));
    }
    out.push('}');
    out
}

impl<S, N> FormatEvent<S, N> for ComponentBaseJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let ts = kubelet_core::clock::wall_now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let meta = event.metadata();
        writeln!(
            writer,
            "{}",
            render(ts, meta.level(), meta.file(), meta.line(), &fields)
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The lines the formatter writes for what `log` logs, parsed by a JSON reader.
    fn lines(log: impl FnOnce()) -> (Vec<String>, Vec<serde_json::Map<String, Value>>) {
        let buffer = Buffer::default();
        let b = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .event_format(ComponentBaseJson)
            .with_max_level(Level::TRACE)
            .with_writer(move || b.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let raw: Vec<String> = text.lines().map(str::to_string).collect();
        let parsed = raw
            .iter()
            .map(|l| match serde_json::from_str::<Value>(l) {
                Ok(Value::Object(m)) => m,
                other => panic!("not a JSON object: {l}: {other:?}"),
            })
            .collect();
        (raw, parsed)
    }

    #[test]
    fn lines_have_component_bases_keys_in_its_order() {
        let err = std::io::Error::other("connection refused");
        let (raw, parsed) = lines(|| {
            tracing::info!(pod = %"default/web", uid = "u-1", restarts = 3u64, ready = true, "Pod status updated");
            tracing::error!(error = %err, pod = "default/web", "Failed to sync pod");
            tracing::warn!("disk \"quoted\"\nand a new line");
            tracing::debug!(ratio = 0.5, "debug line");
            tracing::trace!("trace line");
        });
        assert_eq!(parsed.len(), 5, "{raw:?}");
        let keys: Vec<&str> = parsed[0].keys().map(String::as_str).collect();
        assert!(raw[0].starts_with("{\"ts\":"), "{}", raw[0]);
        let order: Vec<usize> = [
            "\"ts\"",
            "\"caller\"",
            "\"msg\"",
            "\"v\"",
            "\"pod\"",
            "\"uid\"",
        ]
        .iter()
        .map(|k| raw[0].find(k).unwrap())
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{}", raw[0]);
        assert_eq!(keys.len(), 8, "{keys:?}");
        let info = &parsed[0];
        assert!(info["ts"].as_f64().unwrap() > 1.7e9);
        assert!(
            info["caller"]
                .as_str()
                .unwrap()
                .starts_with("src/json_log.rs:"),
            "{info:?}"
        );
        assert_eq!(info["msg"], "Pod status updated");
        assert_eq!(info["v"], 0);
        assert_eq!(info["pod"], "default/web");
        assert_eq!(info["uid"], "u-1");
        assert_eq!(info["restarts"], 3);
        assert_eq!(info["ready"], true);
        let error = &parsed[1];
        assert!(!error.contains_key("v"), "error lines have no v: {error:?}");
        assert_eq!(error["err"], "connection refused");
        assert_eq!(error["msg"], "Failed to sync pod");
        assert_eq!(parsed[2]["msg"], "disk \"quoted\"\nand a new line");
        assert_eq!(parsed[2]["v"], 0);
        assert_eq!(
            (parsed[3]["v"].clone(), parsed[3]["ratio"].clone()),
            (4.into(), 0.5.into())
        );
        assert_eq!(parsed[4]["v"], 6);
    }

    #[test]
    fn callers_are_short() {
        assert_eq!(
            caller(Some("kubelet-core/src/sync/mod.rs"), Some(12)),
            "sync/mod.rs:12"
        );
        assert_eq!(caller(Some("main.rs"), Some(3)), "main.rs:3");
        assert_eq!(caller(None, None), "?:0");
    }
}
