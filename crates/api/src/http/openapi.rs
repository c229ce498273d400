//! `GET /openapi.json`: the OpenAPI 3.1 document, generated from the handlers' own types
//! (utoipa). Every route is registered through `utoipa_axum::routes!`, which documents it
//! in the same call, so the router and the document cannot drift apart.

use crate::state::AppState;
use axum::http::header;
use axum::response::IntoResponse;
use std::sync::LazyLock;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The document's frame; the paths come from the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Switchboard",
        description = "Human-in-the-loop customer messaging: webhooks in, expert console REST, realtime events (Socket.IO at /socket.io, not described here)."
    ),
    modifiers(&BearerAuth)
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

/// The document, built once from the routers (it is the same for every request and pod).
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    super::api()
        .split_for_parts()
        .1
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
});

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
