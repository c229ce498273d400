//! Operations: protection (rate limits, backpressure, hostile and abusive input, errors),
//! health, alerts and mail, reports, scheduled jobs, retention, erasure and exports, a
//! message's journey, key rotation, safer defaults, the OpenAPI document and the Kubernetes
//! manifests against the binary.

mod abuse;
mod alerting;
mod deploy_contract;
mod erasure;
mod errors;
mod exports;
mod health;
mod hostile_input;
mod journey;
mod key_rotation;
mod mailer;
mod openapi;
mod protection;
mod report_metrics;
mod retention;
mod safer_defaults;
mod scheduler;
