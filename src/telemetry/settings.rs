//! Where spans go and how, from the standard OpenTelemetry variables (and
//! `RLP_OTEL_CAPTURE_CONTENT`): read once, each value checked, a value that
//! cannot be used named in a warning — never a failure.
//!
//! Spans are on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL: `/v1/traces` is added) is set,
//! unless `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. Only
//! OTLP over HTTP with protobuf bodies is spoken. The timeout and the batch
//! settings are read here and handed to the exporter; headers
//! (`OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`), the service name and the
//! resource attributes are read by the SDK itself and only checked here.
//! An empty variable counts as unset. Values are never quoted in a warning
//! (an endpoint or a header may carry a credential), except the names of
//! protocols and exporters.

use std::time::Duration;

/// `RLP_OTEL_CAPTURE_CONTENT`: `true` exports arguments, results, error
/// messages and questions and answers (all already scrubbed of secrets).
pub(crate) const CAPTURE_CONTENT: &str = "RLP_OTEL_CAPTURE_CONTENT";

const SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
const TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const PROTOCOL: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"];
const TIMEOUT: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"];
const HEADERS: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"];
const COMPRESSION: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"];
const RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
const BSP_MAX_QUEUE_SIZE: &str = "OTEL_BSP_MAX_QUEUE_SIZE";
/// The largest span queue (and batch) rlp sets up.
const MAX_QUEUE: u64 = 65_536;
const BSP_MAX_EXPORT_BATCH_SIZE: &str = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE";
const BSP_SCHEDULE_DELAY: &str = "OTEL_BSP_SCHEDULE_DELAY";

/// The one protocol spoken.
const HTTP_PROTOBUF: &str = "http/protobuf";
/// The path a base URL gets for traces (OTLP/HTTP).
const TRACES_PATH: &str = "v1/traces";
/// The exporter's timeout when no variable sets one (the specification's).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The batch processor's defaults (the specification's).
const DEFAULT_BATCH: Batch =
    Batch { max_queue_size: 2048, max_export_batch_size: 512, scheduled_delay: Duration::from_secs(5) };

/// Where and how spans are sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The collector's traces URL.
    pub(crate) endpoint: Endpoint,
    /// How long one export may take (its attempts together).
    pub(crate) timeout: Duration,
    /// Whether content (arguments, results, messages) is exported.
    pub(crate) capture_content: bool,
    /// The batch processor of live spans.
    pub(crate) batch: Batch,
}

/// The batch processor's settings (`OTEL_BSP_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    /// Spans queued at most; past it, spans are dropped.
    pub max_queue_size: usize,
    /// Spans sent in one request at most.
    pub max_export_batch_size: usize,
    /// How long spans wait before they are sent.
    pub scheduled_delay: Duration,
}

/// Settings read from the environment, and the warnings about values that
/// could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reading<T> {
    /// What was read.
    pub settings: T,
    /// One line per value that could not be used (without `warning: `).
    pub warnings: Vec<String>,
}

/// The variable `name` of this process's environment (what [`Settings`]
/// reads by default); one that is not UTF-8 counts as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The collector's traces URL (`http` or `https`). Its `Debug`, like its
/// `Display`, leaves out what may be a credential.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Endpoint(url::Url);

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Endpoint").field(&self.to_string()).finish()
    }
}

impl Endpoint {
    /// `text` as it is (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    fn exact(text: &str) -> Option<Endpoint> {
        let url = url::Url::parse(text).ok()?;
        (matches!(url.scheme(), "http" | "https") && url.host().is_some()).then_some(Endpoint(url))
    }

    /// `text` as a base URL, `v1/traces` added to its path
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    fn base(text: &str) -> Option<Endpoint> {
        let Endpoint(mut url) = Endpoint::exact(text)?;
        let path = format!("{}/{TRACES_PATH}", url.path().trim_end_matches('/'));
        url.set_path(&path);
        Some(Endpoint(url))
    }

    /// An `ENDPOINT` given on the command line: a base URL, unless it names
    /// the traces path already.
    fn given(text: &str) -> Option<Endpoint> {
        let url = url::Url::parse(text).ok()?;
        if url.path().trim_end_matches('/').ends_with(&format!("/{TRACES_PATH}")) {
            Endpoint::exact(text)
        } else {
            Endpoint::base(text)
        }
    }

    /// The URL requests go to.
    pub(crate) fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// The URL without its user name, password, query and fragment: what
/// messages show.
impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = &self.0;
        write!(f, "{}://{}", url.scheme(), url.host_str().unwrap_or_default())?;
        if let Some(port) = url.port() {
            write!(f, ":{port}")?;
        }
        f.write_str(url.path())
    }
}

impl Settings {
    /// Settings for live spans: `None` when spans are off (no endpoint set,
    /// `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`, a protocol
    /// other than http/protobuf, an endpoint that is not a URL).
    pub fn live(env: impl Fn(&str) -> Option<String>) -> Reading<Option<Settings>> {
        let mut read = Read::new(&env);
        if read.flag(SDK_DISABLED, "the SDK stays enabled") || !read.exporter_is_otlp() {
            return read.done(None);
        }
        let settings = match read.endpoint().and_then(|endpoint| endpoint.map(|e| read.settings(e)).transpose()) {
            Ok(settings) => settings,
            Err(why) => {
                read.warnings.push(format!("{why}; spans are off"));
                None
            }
        };
        read.done(settings)
    }

    /// Settings for `rlp trace export --otlp [ENDPOINT]`: `endpoint` if
    /// given (a base URL, unless it names `/v1/traces`), else the
    /// variables'. An explicit export ignores `OTEL_SDK_DISABLED` and
    /// `OTEL_TRACES_EXPORTER`. The error says why nothing can be sent.
    pub(crate) fn export(
        env: impl Fn(&str) -> Option<String>,
        endpoint: Option<&str>,
    ) -> Result<Reading<Settings>, String> {
        let mut read = Read::new(&env);
        let endpoint = match endpoint {
            Some(text) => Endpoint::given(text)
                .ok_or_else(|| "the endpoint given to --otlp is not an http:// or https:// URL".to_string())?,
            None => read.endpoint()?.ok_or_else(|| {
                format!(
                    "no collector to send to: --otlp names no ENDPOINT, and neither {TRACES_ENDPOINT} nor {ENDPOINT} is set"
                )
            })?,
        };
        let settings = read.settings(endpoint)?;
        Ok(read.done(settings))
    }

    /// Whether content (arguments, results, messages) is exported.
    pub fn capture_content(&self) -> bool {
        self.capture_content
    }

    /// The collector's traces URL.
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }
}

/// Reading the variables, warnings collected as they come.
struct Read<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    warnings: Vec<String>,
}

impl<'a> Read<'a> {
    fn new(env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Read { env, warnings: Vec::new() }
    }

    fn done<T>(self, settings: T) -> Reading<T> {
        Reading { settings, warnings: self.warnings }
    }

    /// Variable `name`, trimmed; empty counts as unset.
    fn var(&self, name: &str) -> Option<String> {
        (self.env)(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    /// The first of `names` that is set (the signal's own variable before
    /// the general one), with its name.
    fn first(&self, names: [&'static str; 2]) -> Option<(&'static str, String)> {
        names.into_iter().find_map(|name| self.var(name).map(|value| (name, value)))
    }

    /// A boolean variable: `true` or `false` in any case; anything else is
    /// false, with a warning saying what that means (`otherwise`).
    fn flag(&mut self, name: &str, otherwise: &str) -> bool {
        match self.var(name) {
            None => false,
            Some(value) if value.eq_ignore_ascii_case("true") => true,
            Some(value) if value.eq_ignore_ascii_case("false") => false,
            Some(_) => {
                self.warnings.push(format!("{name} is neither true nor false; {otherwise}"));
                false
            }
        }
    }

    /// Whether `OTEL_TRACES_EXPORTER` (default `otlp`) asks for OTLP: `none`
    /// turns spans off; an exporter rlp does not have is named in a warning.
    fn exporter_is_otlp(&mut self) -> bool {
        let Some(value) = self.var(TRACES_EXPORTER) else { return true };
        let names: Vec<String> =
            value.split(',').map(|n| n.trim().to_ascii_lowercase()).filter(|n| !n.is_empty()).collect();
        if names.iter().any(|n| n == "none") {
            return false;
        }
        let otlp = names.iter().any(|n| n == "otlp");
        let others: Vec<&str> = names.iter().map(String::as_str).filter(|n| *n != "otlp").collect();
        if !others.is_empty() {
            let consequence = if otlp { "spans go over OTLP only" } else { "spans are off" };
            let shown = others.iter().map(|n| format!("`{}`", crate::text::ellipsize(n, 32))).collect::<Vec<_>>();
            self.warnings.push(format!(
                "{TRACES_EXPORTER} names {}, which rlp does not have (it exports over OTLP only); {consequence}",
                shown.join(", ")
            ));
        }
        otlp || others.is_empty()
    }

    /// The traces URL: the signal's variable as it is, else the general
    /// one with `/v1/traces` added; `None` when neither is set; the error
    /// names the one set when it is not a URL.
    fn endpoint(&mut self) -> Result<Option<Endpoint>, String> {
        let (name, endpoint) = match (self.var(TRACES_ENDPOINT), self.var(ENDPOINT)) {
            (Some(text), _) => (TRACES_ENDPOINT, Endpoint::exact(&text)),
            (None, Some(text)) => (ENDPOINT, Endpoint::base(&text)),
            (None, None) => return Ok(None),
        };
        endpoint.map(Some).ok_or_else(|| format!("{name} is not an http:// or https:// URL"))
    }

    /// The rest of the settings once the endpoint is known; the error names
    /// the protocol variable when it asks for another protocol than
    /// http/protobuf.
    fn settings(&mut self, endpoint: Endpoint) -> Result<Settings, String> {
        if let Some((name, value)) = self.first(PROTOCOL)
            && value != HTTP_PROTOBUF
        {
            let asked = match value.as_str() {
                "grpc" | "http/json" => format!("asks for {value}"),
                _ => "names no protocol rlp knows".to_string(),
            };
            return Err(format!("{name} {asked}; rlp sends spans over {HTTP_PROTOBUF} only"));
        }
        self.check_headers();
        self.check_compression();
        self.check_resource_attributes();
        let capture_content = self.flag(CAPTURE_CONTENT, "content is not exported");
        Ok(Settings { endpoint, timeout: self.timeout(), capture_content, batch: self.batch() })
    }

    /// `OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`: positive milliseconds.
    fn timeout(&mut self) -> Duration {
        let Some((name, value)) = self.first(TIMEOUT) else { return DEFAULT_TIMEOUT };
        match value.parse::<u64>() {
            Ok(ms) if ms > 0 => Duration::from_millis(ms),
            _ => {
                self.warnings.push(format!(
                    "{name} is not a positive number of milliseconds; the default ({} ms) is used",
                    DEFAULT_TIMEOUT.as_millis()
                ));
                DEFAULT_TIMEOUT
            }
        }
    }

    /// A positive whole number from variable `name`, else `default` (with
    /// a warning when the variable is set).
    fn count(&mut self, name: &str, default: u64) -> u64 {
        match self.var(name).map(|value| value.parse::<u64>()) {
            None => default,
            Some(Ok(n)) if n > 0 => n,
            Some(_) => {
                self.warnings.push(format!("{name} is not a positive whole number; the default ({default}) is used"));
                default
            }
        }
    }

    /// A count from variable `name` (see [`Read::count`]) at most
    /// `limit`, with a warning when it was more.
    fn bounded(&mut self, name: &str, default: u64, limit: u64) -> usize {
        let n = self.count(name, default);
        if n > limit {
            self.warnings.push(format!("{name} is more than {limit}; {limit} is used"));
        }
        usize::try_from(n.min(limit)).unwrap_or(usize::MAX)
    }

    /// `OTEL_BSP_*`: the queue, the batch (at most the queue) and the delay.
    /// The queue is allocated whole when spans start, so it is bounded.
    fn batch(&mut self) -> Batch {
        let max_queue_size = self.bounded(BSP_MAX_QUEUE_SIZE, DEFAULT_BATCH.max_queue_size as u64, MAX_QUEUE);
        let mut max_export_batch_size =
            self.bounded(BSP_MAX_EXPORT_BATCH_SIZE, DEFAULT_BATCH.max_export_batch_size as u64, MAX_QUEUE);
        if max_export_batch_size > max_queue_size {
            max_export_batch_size = max_queue_size;
            if self.var(BSP_MAX_EXPORT_BATCH_SIZE).is_some() {
                self.warnings.push(format!(
                    "{BSP_MAX_EXPORT_BATCH_SIZE} is larger than the queue ({max_queue_size}); batches of {max_queue_size} are sent"
                ));
            }
        }
        let delay = self.count(BSP_SCHEDULE_DELAY, DEFAULT_BATCH.scheduled_delay.as_millis() as u64);
        Batch { max_queue_size, max_export_batch_size, scheduled_delay: Duration::from_millis(delay) }
    }

    /// `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, which the exporter reads: an
    /// entry it would drop (not `name=value`, a name or value HTTP does not
    /// allow) is named by its position, never by its text.
    fn check_headers(&mut self) {
        let Some((name, value)) = self.first(HEADERS) else { return };
        let sendable = |entry: &str| {
            let Some((key, value)) = entry.split_once('=') else { return false };
            let value = value.trim();
            let decoded = percent_encoding::percent_decode_str(value).decode_utf8().map(|v| v.into_owned());
            let value = decoded.unwrap_or_else(|_| value.to_string());
            http::HeaderName::from_bytes(key.trim().as_bytes()).is_ok()
                && !value.is_empty()
                && http::HeaderValue::from_str(&value).is_ok()
        };
        let dropped: Vec<String> = value
            .split_terminator(',')
            .map(str::trim)
            .enumerate()
            .filter(|(_, entry)| !entry.is_empty() && !sendable(entry))
            .map(|(i, _)| (i + 1).to_string())
            .collect();
        if !dropped.is_empty() {
            self.warnings.push(format!(
                "{name}: entr{} {} {} not name=value with a valid header name and value; not sent",
                if dropped.len() == 1 { "y" } else { "ies" },
                dropped.join(", "),
                if dropped.len() == 1 { "is" } else { "are" },
            ));
        }
    }

    /// `OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION`: spans are sent
    /// uncompressed.
    fn check_compression(&mut self) {
        if let Some((name, value)) = self.first(COMPRESSION)
            && !value.eq_ignore_ascii_case("none")
        {
            self.warnings.push(format!("{name} is not used: rlp sends spans uncompressed"));
        }
    }

    /// `OTEL_RESOURCE_ATTRIBUTES`, which the SDK reads: an entry without
    /// `=` is dropped.
    fn check_resource_attributes(&mut self) {
        let Some(value) = self.var(RESOURCE_ATTRIBUTES) else { return };
        let dropped = value.split_terminator(',').filter(|entry| !entry.trim().is_empty() && !entry.contains('='));
        if dropped.count() > 0 {
            self.warnings.push(format!("{RESOURCE_ATTRIBUTES} has entries that are not key=value; they are left out"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    fn live(pairs: &[(&str, &str)]) -> Reading<Option<Settings>> {
        Settings::live(env(pairs))
    }

    #[test]
    fn spans_are_on_only_with_an_endpoint() {
        assert_eq!(live(&[]), Reading { settings: None, warnings: vec![] });
        let on = live(&[(ENDPOINT, "http://collector:4318")]).settings.unwrap();
        assert_eq!(on.endpoint.as_str(), "http://collector:4318/v1/traces");
        assert_eq!((on.timeout, on.capture_content, on.batch), (DEFAULT_TIMEOUT, false, DEFAULT_BATCH));
        let base_with_path = live(&[(ENDPOINT, "https://c.example/otlp/")]).settings.unwrap();
        assert_eq!(base_with_path.endpoint.as_str(), "https://c.example/otlp/v1/traces");
        let exact = live(&[(TRACES_ENDPOINT, "http://c:4318/custom"), (ENDPOINT, "http://other:1")]);
        assert_eq!(exact.settings.unwrap().endpoint.as_str(), "http://c:4318/custom");
        for off in [(SDK_DISABLED, "TRUE"), (TRACES_EXPORTER, "none"), (TRACES_EXPORTER, "otlp, none")] {
            assert_eq!(live(&[(ENDPOINT, "http://c:4318"), off]), Reading { settings: None, warnings: vec![] });
        }
        assert!(live(&[(ENDPOINT, "  ")]).settings.is_none());
    }

    #[test]
    fn a_protocol_other_than_protobuf_is_named_and_turns_spans_off() {
        let grpc = live(&[(ENDPOINT, "http://c:4317"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(grpc.settings, None);
        assert_eq!(
            grpc.warnings,
            ["OTEL_EXPORTER_OTLP_PROTOCOL asks for grpc; rlp sends spans over http/protobuf only; spans are off"]
        );
        let json = live(&[
            (ENDPOINT, "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
        ]);
        assert_eq!(json.settings, None);
        assert!(json.warnings[0].starts_with("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL asks for http/json;"), "{json:?}");
        let odd = live(&[(ENDPOINT, "http://c:4318"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")]);
        assert_eq!(odd.settings, None);
        assert!(odd.warnings[0].contains("names no protocol rlp knows"), "{odd:?}");
        assert!(!odd.warnings[0].contains("pigeon"), "{odd:?}");
        let fine = live(&[(ENDPOINT, "http://c:4318"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]);
        assert!(fine.settings.is_some() && fine.warnings.is_empty(), "{fine:?}");
    }

    #[test]
    fn malformed_values_are_warnings_that_never_quote_the_value() {
        let secret = "s3cr3t-v4lue";
        let reading = live(&[
            (ENDPOINT, "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", secret),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cr3t-v4lue,s3cr3t-v4lue,x=,=y, ok=1"),
            (BSP_MAX_QUEUE_SIZE, "0"),
            (BSP_MAX_EXPORT_BATCH_SIZE, "4096"),
            (BSP_SCHEDULE_DELAY, "-1"),
            (CAPTURE_CONTENT, "yes"),
            (SDK_DISABLED, "nope"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            (RESOURCE_ATTRIBUTES, "service.version=1,s3cr3t-v4lue"),
            (TRACES_EXPORTER, "otlp,zipkin"),
        ]);
        let settings = reading.settings.unwrap();
        assert_eq!(settings.timeout, DEFAULT_TIMEOUT);
        assert!(!settings.capture_content);
        assert_eq!(
            settings.batch,
            Batch { max_queue_size: 2048, max_export_batch_size: 2048, scheduled_delay: Duration::from_secs(5) }
        );
        assert_eq!(
            reading.warnings,
            [
                "OTEL_SDK_DISABLED is neither true nor false; the SDK stays enabled",
                "OTEL_TRACES_EXPORTER names `zipkin`, which rlp does not have (it exports over OTLP only); spans go over OTLP only",
                "OTEL_EXPORTER_OTLP_HEADERS: entries 2, 3, 4 are not name=value with a valid header name and value; not sent",
                "OTEL_EXPORTER_OTLP_COMPRESSION is not used: rlp sends spans uncompressed",
                "OTEL_RESOURCE_ATTRIBUTES has entries that are not key=value; they are left out",
                "RLP_OTEL_CAPTURE_CONTENT is neither true nor false; content is not exported",
                "OTEL_EXPORTER_OTLP_TIMEOUT is not a positive number of milliseconds; the default (10000 ms) is used",
                "OTEL_BSP_MAX_QUEUE_SIZE is not a positive whole number; the default (2048) is used",
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE is larger than the queue (2048); batches of 2048 are sent",
                "OTEL_BSP_SCHEDULE_DELAY is not a positive whole number; the default (5000) is used",
            ]
        );
        assert!(reading.warnings.iter().all(|w| !w.contains(secret)));
        let bad_url = live(&[(TRACES_ENDPOINT, "ftp://user:s3cr3t-v4lue@c/")]);
        assert_eq!(bad_url.settings, None);
        assert_eq!(
            bad_url.warnings,
            ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not an http:// or https:// URL; spans are off"]
        );
        // A queue is allocated whole: a huge one is cut to the bound, never a panic.
        let huge = live(&[(ENDPOINT, "http://c:4318"), (BSP_MAX_QUEUE_SIZE, "18446744073709551615")]);
        assert_eq!(huge.settings.unwrap().batch.max_queue_size, 65_536);
        assert_eq!(huge.warnings, ["OTEL_BSP_MAX_QUEUE_SIZE is more than 65536; 65536 is used"]);
        let only_zipkin = live(&[(ENDPOINT, "http://c:4318"), (TRACES_EXPORTER, "zipkin")]);
        assert_eq!(only_zipkin.settings, None);
        assert!(only_zipkin.warnings[0].ends_with("; spans are off"), "{only_zipkin:?}");
    }

    #[test]
    fn values_that_fit_are_used() {
        let reading = live(&[
            (TRACES_ENDPOINT, "http://c:4318/v1/traces"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "oops"),
            (BSP_MAX_QUEUE_SIZE, "100"),
            (BSP_MAX_EXPORT_BATCH_SIZE, "10"),
            (BSP_SCHEDULE_DELAY, "250"),
            (CAPTURE_CONTENT, "True"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Basic%20abc, x-tenant = blue"),
        ]);
        assert_eq!(reading.warnings, Vec::<String>::new());
        let settings = reading.settings.unwrap();
        assert_eq!(settings.timeout, Duration::from_millis(2500));
        assert!(settings.capture_content());
        assert_eq!(
            settings.batch,
            Batch { max_queue_size: 100, max_export_batch_size: 10, scheduled_delay: Duration::from_millis(250) }
        );
    }

    #[test]
    fn the_endpoint_is_shown_without_credentials() {
        let settings = live(&[(ENDPOINT, "https://user:pa55@c.example:8443/base?token=t#f")]).settings.unwrap();
        assert_eq!(settings.endpoint.to_string(), "https://c.example:8443/base/v1/traces");
        assert!(settings.endpoint.as_str().contains("pa55"));
    }

    #[test]
    fn an_explicit_export_takes_a_base_url_or_the_traces_url() {
        let none = env(&[]);
        let export = |endpoint| Settings::export(&none, endpoint).map(|r| r.settings.endpoint.as_str().to_string());
        assert_eq!(export(Some("http://c:4318")).unwrap(), "http://c:4318/v1/traces");
        assert_eq!(export(Some("http://c:4318/v1/traces")).unwrap(), "http://c:4318/v1/traces");
        assert_eq!(export(Some("http://c:4318/x/v1/traces/")).unwrap(), "http://c:4318/x/v1/traces/");
        assert_eq!(
            export(Some("c:4318")).unwrap_err(),
            "the endpoint given to --otlp is not an http:// or https:// URL"
        );
        assert!(export(None).unwrap_err().starts_with("no collector to send to"));
        let disabled = env(&[(ENDPOINT, "http://c:4318"), (SDK_DISABLED, "true"), (TRACES_EXPORTER, "none")]);
        assert_eq!(Settings::export(&disabled, None).unwrap().settings.endpoint.as_str(), "http://c:4318/v1/traces");
        let grpc = env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert!(Settings::export(&grpc, Some("http://c:4317")).unwrap_err().contains("asks for grpc"));
        let bad = env(&[(ENDPOINT, "not a url")]);
        assert_eq!(
            Settings::export(&bad, None).unwrap_err(),
            "OTEL_EXPORTER_OTLP_ENDPOINT is not an http:// or https:// URL"
        );
    }
}
