//! The team: login and tokens, sessions revoked, members, invitations, roles and passwords,
//! saved replies and internal notes.

mod auth;
mod notes;
mod revocation;
mod saved_replies;
mod team_members;
