//! OpenTelemetry export of the library crates' spans: run, drive, step
//! and block, host call, job lease, HTTP request and the agent's jobs.
//!
//! Off unless an endpoint is given (`--otlp-endpoint URL`, or the standard
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`);
//! when off, no layer is installed and no trace context is made, so the
//! spans cost what they cost before. When on, spans go in batches over
//! OTLP/HTTP (protobuf) from a thread of the exporter's, and the last batch
//! is sent when the command ends. The trace context crosses processes as
//! W3C `traceparent` ([`wfhost_protocol::trace`]): a server's request to
//! its run process, a run's job to the agent that leases it, an agent's
//! calls to the server, and `TRACEPARENT` from whoever started wfhost.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The flag's value goes into this variable, for this process and the
/// processes it starts (run processes, agents' children read it too).
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The traces endpoint used as it is (no `/v1/traces` added).
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const PROTOCOL_ENVS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];
const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";
const SDK_DISABLED_ENV: &str = "OTEL_SDK_DISABLED";
const TRACES_EXPORTER_ENV: &str = "OTEL_TRACES_EXPORTER";

/// The exporter while the command runs; dropping it sends what is left.
pub struct Export {
    provider: SdkTracerProvider,
}

impl Drop for Export {
    fn drop(&mut self) {
        // Sends the spans not sent yet, waiting at most the export
        // timeout; an unreachable collector loses them, not the command.
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!(error = %e, "the trace exporter did not shut down cleanly");
        }
    }
}

/// Whether traces are exported, and where: the flag wins over the
/// variables, which the flag's value replaces for the processes this one
/// starts. A flag that is not an http(s) URL is an error; a variable that
/// is not one is warned about and ignored (the command goes on untraced).
pub fn endpoint(flag: Option<&str>) -> Result<Option<String>, String> {
    if let Some(url) = flag {
        check_url(url).map_err(|e| format!("--otlp-endpoint {url:?}: {e}"))?;
        // SAFETY: called at the start of main, before any thread exists.
        unsafe {
            std::env::set_var(ENDPOINT_ENV, url);
            std::env::remove_var(TRACES_ENDPOINT_ENV);
        }
    }
    if env_is(SDK_DISABLED_ENV, |v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    if env_is(TRACES_EXPORTER_ENV, |v| {
        !v.split(',').any(|e| e.trim() == "otlp")
    }) {
        return Ok(None);
    }
    for var in [TRACES_ENDPOINT_ENV, ENDPOINT_ENV] {
        let Some(url) = std::env::var(var).ok().filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        return Ok(match check_url(&url) {
            Ok(()) => Some(url),
            Err(e) => {
                eprintln!("warning: {var}={url:?}: {e}; traces are not exported");
                None
            }
        });
    }
    Ok(None)
}

fn env_is(var: &str, test: impl Fn(&str) -> bool) -> bool {
    std::env::var(var).is_ok_and(|v| !v.trim().is_empty() && test(v.trim()))
}

/// An http or https URL with a host.
fn check_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or("not an http:// or https:// URL")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err("the URL has no host".into());
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the URL holds a space or a control character".into());
    }
    Ok(())
}

/// Start exporting to the endpoint the environment now names (see
/// [`endpoint`]): the exporter, and the layer that feeds it. `command`
/// (the subcommand) is a resource attribute, which tells a trace's
/// processes apart (`serve`, `serve-run`, `agent`, `run`).
pub fn start<S>(command: &str) -> Result<(Export, impl tracing_subscriber::Layer<S>), String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    for var in PROTOCOL_ENVS {
        if let Ok(protocol) = std::env::var(var)
            && !matches!(protocol.trim(), "" | "http/protobuf")
        {
            eprintln!("warning: {var}={protocol:?}: wfhost exports http/protobuf only; using it");
        }
    }
    // An https collector is reached with the TLS of the registry client.
    wfhost_distribution::registry::install_tls_provider();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .build()
        .map_err(|e| format!("cannot start the trace exporter: {e}"))?;
    let mut resource = opentelemetry_sdk::Resource::builder()
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_attribute(opentelemetry::KeyValue::new(
            "wfhost.command",
            command.to_owned(),
        ))
        .with_attribute(opentelemetry::KeyValue::new(
            "process.pid",
            i64::from(std::process::id()),
        ));
    if std::env::var(SERVICE_NAME_ENV).is_err() {
        resource = resource.with_service_name("wfhost");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("wfhost");
    wfhost_protocol::trace::install(Box::new(W3c(TraceContextPropagator::new())));
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false);
    Ok((Export { provider }, layer))
}

/// W3C Trace Context through the OpenTelemetry layer's span data.
struct W3c(TraceContextPropagator);

impl wfhost_protocol::trace::Propagation for W3c {
    fn traceparent(&self, span: &tracing::Span) -> Option<String> {
        let cx = span.context();
        if !cx.span().span_context().is_valid() {
            return None;
        }
        let mut carrier = HashMap::new();
        self.0.inject_context(&cx, &mut carrier);
        carrier
            .remove(wfhost_protocol::trace::TRACEPARENT)
            .filter(|v| wfhost_protocol::trace::is_well_formed(v))
    }

    fn adopt(&self, span: &tracing::Span, traceparent: &str) {
        if !wfhost_protocol::trace::is_well_formed(traceparent) {
            return;
        }
        let carrier = HashMap::from([(
            wfhost_protocol::trace::TRACEPARENT.to_owned(),
            traceparent.to_owned(),
        )]);
        let cx = self.0.extract(&carrier);
        if cx.span().span_context().is_valid()
            && let Err(e) = span.set_parent(cx)
        {
            tracing::debug!(error = %e, "a trace parent was not adopted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_with_a_host_are_endpoints() {
        for good in [
            "http://127.0.0.1:4318",
            "https://collector.example/otlp",
            "http://[::1]:4318/",
        ] {
            assert_eq!(check_url(good), Ok(()), "{good}");
        }
        for bad in [
            "127.0.0.1:4318",
            "grpc://x:4317",
            "http://",
            "http://:4318",
            "http://a b",
            "",
        ] {
            assert!(check_url(bad).is_err(), "{bad:?} passed");
        }
    }
}
