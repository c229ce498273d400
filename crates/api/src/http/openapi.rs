//! `GET /openapi.json`: the OpenAPI 3.1 document, generated from the handlers' own types
//! (utoipa). Every route is registered through `utoipa_axum::routes!`, which documents it
//! in the same call, so the router and the document cannot drift apart.

use crate::state::AppState;
use axum::http::header;
use axum::response::IntoResponse;
use std::borrow::Cow;
use std::sync::LazyLock;
use switchboard_domain::InboundStatus;
use switchboard_domain::events::{
    AgentMessageSent, ConversationErased, EventKind, MessageCreated, MessageStatusUpdated,
    MessageSummary, NoteAdded, QueueItemEvent, ReportReady,
};
use utoipa::openapi::Ref;
use utoipa::openapi::schema::{
    AllOfBuilder, KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type,
};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The document's frame; the paths come from the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Switchboard",
        description = "Human-in-the-loop customer messaging: webhooks in, expert console REST, \
            realtime events (Socket.IO at /socket.io; each event's name and payload is one of the \
            `RealtimeEvent` schema)."
    ),
    components(schemas(
        // Referenced by query parameters only, which utoipa does not collect.
        InboundStatus,
        QueueItemEvent,
        MessageCreated,
        MessageSummary,
        AgentMessageSent,
        MessageStatusUpdated,
        ReportReady,
        NoteAdded,
        ConversationErased,
        // Presence is ephemeral: sent to the org's sockets without a `seq`, never replayed.
        switchboard_realtime::PresenceEvent,
        switchboard_realtime::Viewer
    )),
    modifiers(&BearerAuth, &RealtimeEvents)
)]
pub(crate) struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// The Socket.IO events, which no path describes: `RealtimeEvent` is one `{event, data}` per
/// event name, `data` being the flow's payload plus the `org_id` and `seq` the relay adds
/// (`EventEnvelope`). `GET /events` replays the same pairs (`StoredEvent`), and the console
/// generates its event types from this schema (console/check.sh).
struct RealtimeEvents;

/// Each event's payload type. No wildcard: a new event kind does not compile until the
/// document describes it.
fn payload_schema(kind: EventKind) -> Cow<'static, str> {
    match kind {
        EventKind::QueueItemCreated | EventKind::QueueItemUpdated => QueueItemEvent::name(),
        EventKind::MessageCreated => MessageCreated::name(),
        EventKind::AgentMessageSent => AgentMessageSent::name(),
        EventKind::MessageStatusUpdated => MessageStatusUpdated::name(),
        EventKind::ReportReady => ReportReady::name(),
        EventKind::NoteAdded => NoteAdded::name(),
        EventKind::ConversationErased => ConversationErased::name(),
    }
}

impl Modify for RealtimeEvents {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let envelope = ObjectBuilder::new()
            .description(Some(
                "Added to every realtime payload: the org, and its event number (one more than \
                 the org's previous event; a jump means events were missed, `GET /events` has them).",
            ))
            .property(
                "org_id",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid))),
            )
            .required("org_id")
            .property(
                "seq",
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64))),
            )
            .required("seq");
        components
            .schemas
            .insert("EventEnvelope".to_owned(), envelope.into());
        let mut events = OneOfBuilder::new().description(Some(
            "A Socket.IO event: `event` is its name, `data` the payload it carries.",
        ));
        for kind in EventKind::ALL {
            let data = AllOfBuilder::new()
                .item(Ref::from_schema_name(payload_schema(kind)))
                .item(Ref::from_schema_name("EventEnvelope"));
            events = events.item(
                ObjectBuilder::new()
                    .property(
                        "event",
                        ObjectBuilder::new()
                            .schema_type(Type::String)
                            .enum_values(Some([kind.as_str()])),
                    )
                    .required("event")
                    .property("data", data)
                    .required("data"),
            );
        }
        components
            .schemas
            .insert("RealtimeEvent".to_owned(), events.into());
    }
}

/// The document, built once from the routers (it is the same for every request and pod).
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    let mut doc = super::api().split_for_parts().1;
    qualify_operation_ids(&mut doc);
    doc.to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
});

/// utoipa names an operation after its handler, and most feature modules have a `list` and
/// a `show`: each id gets its tag in front (`expert_queue_list`), so that ids are unique as
/// OpenAPI requires (client generators key operations by them).
fn qualify_operation_ids(doc: &mut utoipa::openapi::OpenApi) {
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in operations.into_iter().flatten() {
            let tag = op.tags.as_ref().and_then(|t| t.first());
            if let (Some(id), Some(tag)) = (&op.operation_id, tag) {
                op.operation_id = Some(format!("{}_{id}", tag.replace('-', "_")));
            }
        }
    }
}

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(document))
}

#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "This document", content_type = "application/json")))]
async fn document() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
}
