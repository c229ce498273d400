//! The storage error type.

/// Errors from the storage layer. Display never includes connection strings or secrets.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `DATABASE_URL` does not parse.
    #[error("DATABASE_URL is not a valid Postgres URL")]
    InvalidUrl,
    /// A query failed.
    #[error("database error: {0}")]
    Sqlx(#[source] sqlx::Error),
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
    /// A realtime event's payload could not be serialized (see `switchboard_domain::Event`).
    #[error("event payload: {0}")]
    Payload(#[source] serde_json::Error),
    /// The database settings contradict each other (see `switchboard_config::PgTls`).
    #[error("{0}")]
    Config(String),
    /// A test armed a fault at this point (never in production).
    #[error(transparent)]
    Injected(#[from] switchboard_domain::faults::ErasureInjected),
    /// The database returned something the code does not expect.
    #[error("unexpected: {0}")]
    Unexpected(String),
}

/// Every `?` on a query classifies its error, so a unique or foreign-key violation is
/// [`StoreError::Conflict`] / [`StoreError::MissingReference`] (a 409 / 422) wherever it
/// happens, with no call site that can forget it and turn a 409 into a 500.
impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        StoreError::classify(error)
    }
}

impl StoreError {
    /// Maps constraint violations to their own variants so handlers can answer 409/422 from
    /// one place instead of matching SQLSTATEs everywhere. Private: `From` is the only way in.
    fn classify(error: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &error {
            match db.code().as_deref() {
                Some("23505") => return StoreError::Conflict,
                Some("23503") => return StoreError::MissingReference,
                _ => {}
            }
        }
        StoreError::Sqlx(error)
    }

    /// Whether the failure says Postgres is away rather than anything about the request:
    /// unreachable, restarting (`57P03` "the database system is starting up"), shutting
    /// down, out of connections, or the pool gave up waiting. Callers answer 503 so that
    /// clients and providers retry; never 500.
    pub fn is_unavailable(&self) -> bool {
        let StoreError::Sqlx(error) = self else {
            return false;
        };
        match error {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Protocol(_) => true,
            sqlx::Error::Database(db) => {
                db.code().is_some_and(|code| {
                    // 08: connection exception; 57P0x: shutdown, crash, cannot connect now;
                    // 53300: too many connections.
                    code.starts_with("08") || code.starts_with("57P") || code.as_ref() == "53300"
                }) || self.is_transaction_retry()
            }
            _ => false,
        }
    }

    /// Whether Postgres gave up on the transaction for another's sake (`40001`
    /// serialization failure, `40P01` deadlock): the same work may succeed when run again.
    pub fn is_transaction_retry(&self) -> bool {
        matches!(self, StoreError::Sqlx(sqlx::Error::Database(db))
            if db.code().is_some_and(|code| matches!(code.as_ref(), "40001" | "40P01")))
    }

    /// Whether Postgres refused the data of a row (a NUL byte in text, an invalid escape in
    /// JSON, a row referencing something gone, a value past a limit) rather than failing as
    /// a whole: a batch that fails so can be retried without the row.
    pub fn is_row_error(&self) -> bool {
        match self {
            StoreError::MissingReference | StoreError::Conflict => true,
            StoreError::Sqlx(sqlx::Error::Encode(_)) => true,
            StoreError::Sqlx(sqlx::Error::Database(db)) => db.code().is_some_and(|code| {
                // 22: data exception; 23: integrity constraint; 54: program limit exceeded.
                code.starts_with("22") || code.starts_with("23") || code.starts_with("54")
            }),
            _ => false,
        }
    }
}
