//! The walk over a Sentry event or breadcrumb: first every named value (fields, extras,
//! tags, breadcrumb data) is judged by its name and removed values are remembered; then all
//! free text is scrubbed, erasing remembered values where they are repeated verbatim.

use sentry::protocol::{Breadcrumb, Context, Event, Map, Value};

use super::fields::{Rule, classify, names_a_provider};
use super::text::{SCRUBBED, scrub_string};

/// Tracing targets of code that handles provider responses or customer payloads: an error
/// logged there may quote them.
const PROVIDER_TARGETS: &[&str] = &[
    "switchboard::alert",
    // Provider clients, the agent client and the Resend body fetch.
    "switchboard_channels",
    "switchboard_flows::dispatch",
    "switchboard_flows::inbound",
    "switchboard_flows::intake",
];

/// Removes personal data and secrets from an event (the `before_send` hook).
pub fn scrub(mut event: Event<'static>) -> Event<'static> {
    scrub_request(&mut event);
    event.user = None;

    let provider = is_provider_target(event.logger.as_deref())
        || names_a_provider(event.extra.keys())
        || names_a_provider(event.tags.keys())
        || event.contexts.values().any(|context| match context {
            Context::Other(fields) => names_a_provider(fields.keys()),
            _ => false,
        });

    let mut removed = Vec::new();
    for context in event.contexts.values_mut() {
        for map in context_maps(context) {
            redact_map(map, provider, &mut removed);
        }
    }
    redact_map(&mut event.extra, provider, &mut removed);
    for (name, value) in event.tags.iter_mut() {
        if removes(classify(name), provider) {
            removed.push(std::mem::replace(value, SCRUBBED.to_owned()));
        }
    }
    for exception in event.exception.values.iter_mut() {
        let synthetic = exception
            .mechanism
            .as_ref()
            .is_some_and(|m| m.synthetic == Some(true));
        // A recorded error's text, in code that talks to providers, is the provider's text.
        // The synthetic exception holds the event's message, scrubbed as text below.
        if provider && !synthetic {
            if let Some(value) = exception.value.as_mut() {
                removed.push(std::mem::replace(value, SCRUBBED.to_owned()));
            }
        }
        if let Some(mechanism) = exception.mechanism.as_mut() {
            redact_map(&mut mechanism.data, provider, &mut removed);
        }
    }

    let texts = [
        event.message.as_mut(),
        event.transaction.as_mut(),
        event.culprit.as_mut(),
    ];
    for text in texts.into_iter().flatten() {
        scrub_string(text, &removed);
    }
    if let Some(entry) = event.logentry.as_mut() {
        scrub_string(&mut entry.message, &removed);
        entry
            .params
            .iter_mut()
            .for_each(|v| scrub_value(v, &removed));
    }
    for exception in event.exception.values.iter_mut() {
        if let Some(value) = exception.value.as_mut() {
            scrub_string(value, &removed);
        }
        if let Some(mechanism) = exception.mechanism.as_mut() {
            if let Some(description) = mechanism.description.as_mut() {
                scrub_string(description, &removed);
            }
            scrub_map(&mut mechanism.data, &removed);
        }
    }
    for context in event.contexts.values_mut() {
        for map in context_maps(context) {
            scrub_map(map, &removed);
        }
    }
    scrub_map(&mut event.extra, &removed);
    event
        .tags
        .values_mut()
        .for_each(|v| scrub_string(v, &removed));
    for breadcrumb in event.breadcrumbs.values.iter_mut() {
        scrub_breadcrumb_in(breadcrumb, &mut removed);
    }
    event
}

/// Removes personal data and secrets from a breadcrumb (the `before_breadcrumb` hook), so
/// that what the scope stores is already clean.
pub fn scrub_breadcrumb(mut breadcrumb: Breadcrumb) -> Breadcrumb {
    scrub_breadcrumb_in(&mut breadcrumb, &mut Vec::new());
    breadcrumb
}

/// Scrubs `breadcrumb`, also erasing the event's `removed` values; leaves `removed` as it was.
fn scrub_breadcrumb_in(breadcrumb: &mut Breadcrumb, removed: &mut Vec<String>) {
    let mark = removed.len();
    let provider = is_provider_target(breadcrumb.category.as_deref())
        || names_a_provider(breadcrumb.data.keys());
    redact_map(&mut breadcrumb.data, provider, removed);
    if let Some(message) = breadcrumb.message.as_mut() {
        scrub_string(message, removed);
    }
    scrub_map(&mut breadcrumb.data, removed);
    removed.truncate(mark);
}

/// The request as before: no body, cookies, query, env, auth or signature headers, no user;
/// also no query or fragment in the URL, and patterns scrubbed from the path and headers.
fn scrub_request(event: &mut Event<'static>) {
    let Some(request) = event.request.as_mut() else {
        return;
    };
    request.data = None;
    request.cookies = None;
    request.query_string = None;
    request.env.clear();
    request.headers.retain(|name, _| !sensitive_header(name));
    request
        .headers
        .values_mut()
        .for_each(|v| scrub_string(v, &[]));
    if let Some(url) = request.url.as_mut() {
        url.set_query(None);
        url.set_fragment(None);
        let mut path = url.path().to_owned();
        scrub_string(&mut path, &[]);
        if path != url.path() {
            url.set_path(&path);
        }
    }
}

fn sensitive_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "authorization",
        "cookie",
        "signature",
        "token",
        "secret",
        "api-key",
    ]
    .iter()
    .any(|part| name.contains(part))
}

/// The free-form maps of a context. Typed fields (OS, runtime, device) are facts about the
/// machine, filled in by the SDK, and stay as they are.
fn context_maps(context: &mut Context) -> Vec<&mut Map<String, Value>> {
    match context {
        Context::Other(map) => vec![map],
        Context::Trace(trace) => vec![&mut trace.data],
        Context::Otel(otel) => vec![&mut otel.attributes, &mut otel.resource, &mut otel.other],
        Context::Device(device) => vec![&mut device.other],
        Context::Os(os) => vec![&mut os.other],
        Context::Runtime(runtime) => vec![&mut runtime.other],
        Context::App(app) => vec![&mut app.other],
        Context::Browser(browser) => vec![&mut browser.other],
        Context::Gpu(gpu) => vec![&mut gpu.other],
        Context::Response(response) => {
            response.cookies = None;
            response.headers.retain(|name, _| !sensitive_header(name));
            // A response body is the other side's text.
            if response.data.is_some() {
                response.data = Some(Value::String(SCRUBBED.to_owned()));
            }
            Vec::new()
        }
        _ => Vec::new(),
    }
}

fn is_provider_target(target: Option<&str>) -> bool {
    target.is_some_and(|target| {
        PROVIDER_TARGETS.iter().any(|prefix| {
            target
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        })
    })
}

fn removes(rule: Rule, provider: bool) -> bool {
    rule == Rule::Remove || (rule == Rule::ErrorText && provider)
}

/// Replaces the values `map`'s names mark (at any depth), remembering what they held.
fn redact_map(map: &mut Map<String, Value>, provider: bool, removed: &mut Vec<String>) {
    redact_entries(map.iter_mut(), provider, removed);
}

/// `redact_map` over the entries of either map type (the protocol's and serde_json's).
fn redact_entries<'a>(
    entries: impl Iterator<Item = (&'a String, &'a mut Value)>,
    provider: bool,
    removed: &mut Vec<String>,
) {
    for (name, value) in entries {
        if removes(classify(name), provider) {
            if !matches!(value, Value::Null | Value::Bool(_)) {
                remember(value, removed);
                *value = Value::String(SCRUBBED.to_owned());
            }
            continue;
        }
        redact_nested(value, provider, removed);
    }
}

/// Objects nested in a kept value are judged by their own names; an array's objects too.
fn redact_nested(value: &mut Value, provider: bool, removed: &mut Vec<String>) {
    match value {
        Value::Object(inner) => {
            let provider = provider || names_a_provider(inner.keys());
            redact_entries(inner.iter_mut(), provider, removed);
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| redact_nested(item, provider, removed)),
        _ => {}
    }
}

fn remember(value: &Value, removed: &mut Vec<String>) {
    match value {
        Value::String(s) => removed.push(s.clone()),
        Value::Number(n) => removed.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| remember(v, removed)),
        Value::Object(map) => map.values().for_each(|v| remember(v, removed)),
        Value::Null | Value::Bool(_) => {}
    }
}

fn scrub_map(map: &mut Map<String, Value>, removed: &[String]) {
    map.values_mut().for_each(|v| scrub_value(v, removed));
}

fn scrub_value(value: &mut Value, removed: &[String]) {
    match value {
        Value::String(s) => scrub_string(s, removed),
        Value::Array(items) => items.iter_mut().for_each(|v| scrub_value(v, removed)),
        Value::Object(map) => map.values_mut().for_each(|v| scrub_value(v, removed)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}
