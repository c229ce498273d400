//! Operations: protection (rate limits, backpressure, hostile and abusive input, errors),
//! health, alerts and mail, reports, scheduled jobs, retention, erasure and exports, key
//! rotation, safer defaults and the OpenAPI document.

mod abuse;
mod alerting;
mod erasure;
mod errors;
mod exports;
mod health;
mod hostile_input;
mod key_rotation;
mod mailer;
mod openapi;
mod protection;
mod report_metrics;
mod retention;
mod safer_defaults;
mod scheduler;
