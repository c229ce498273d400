//! The storage error type.

/// Errors from the storage layer. Display never includes connection strings or secrets.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `DATABASE_URL` does not parse.
    #[error("DATABASE_URL is not a valid Postgres URL")]
    InvalidUrl,
    /// A query failed.
    #[error("database error: {0}")]
    Sqlx(#[from] sqlx::Error),
    /// A migration failed.
    #[error("migration failed: {0}")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// A row referenced something that does not exist (foreign key).
    #[error("referenced row does not exist")]
    MissingReference,
    /// A unique constraint rejected the write.
    #[error("already exists")]
    Conflict,
    /// Encryption or decryption of a secret failed.
    #[error("secret encryption error: {0}")]
    Crypto(&'static str),
    /// The database returned something the code does not expect.
    #[error("unexpected: {0}")]
    Unexpected(String),
}

impl StoreError {
    /// Maps constraint violations to their own variants so handlers can answer 409/422 from
    /// one place instead of matching SQLSTATEs everywhere.
    pub fn classify(error: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &error {
            match db.code().as_deref() {
                Some("23505") => return StoreError::Conflict,
                Some("23503") => return StoreError::MissingReference,
                _ => {}
            }
        }
        StoreError::Sqlx(error)
    }
}
