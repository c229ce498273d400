//! Authentication: HS256 login tokens and the [`Caller`] extractor that resolves the
//! caller's org memberships on every request.

mod caller;
mod jwt;

pub use caller::Caller;
pub use jwt::{Claims, JwtKeys};
