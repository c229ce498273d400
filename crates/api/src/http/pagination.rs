//! Keyset cursors: opaque to clients, a sort key (time, id) inside. Keyset pages never
//! repeat or skip a row whose key does not change, however many rows arrive meanwhile.

use crate::error::ApiError;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Default page size.
pub const DEFAULT_LIMIT: i64 = 50;
/// Largest page size.
pub const MAX_LIMIT: i64 = 200;

/// The cursor that continues after a row with this sort key.
pub fn encode(at: DateTime<Utc>, id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(format!(
        "{}|{id}",
        at.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
    ))
}

/// The sort key inside a cursor, or 400 `invalid_cursor`.
pub fn decode(cursor: &str) -> Result<(DateTime<Utc>, Uuid), ApiError> {
    let invalid = || ApiError::bad_request("invalid_cursor", "cursor is not one this API issued");
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (at, id) = text.split_once('|').ok_or_else(invalid)?;
    let at = DateTime::parse_from_rfc3339(at).map_err(|_| invalid())?;
    let id = id.parse().map_err(|_| invalid())?;
    Ok((at.with_timezone(&Utc), id))
}

/// The page size asked for, or 422 when out of range.
pub fn limit(asked: Option<i64>) -> Result<i64, ApiError> {
    let limit = asked.unwrap_or(DEFAULT_LIMIT);
    if (1..=MAX_LIMIT).contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::validation(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )))
    }
}

/// A list request's `limit` and `cursor`, checked: the page size, the key to continue
/// after, and [`Paging::fetch`] rows to ask the store for (one more than a page, so the
/// extra row says whether another page follows).
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    /// Rows a page holds.
    pub limit: i64,
    /// The sort key of the last row the client has.
    pub after: Option<(DateTime<Utc>, Uuid)>,
}

impl Paging {
    /// 422 for a size out of range, 400 `invalid_cursor` for a cursor this API did not issue.
    pub fn read(limit: Option<i64>, cursor: Option<&str>) -> Result<Self, ApiError> {
        Ok(Self {
            limit: self::limit(limit)?,
            after: cursor.map(decode).transpose()?,
        })
    }

    /// Rows to fetch.
    pub fn fetch(&self) -> i64 {
        self.limit + 1
    }

    /// The page of `rows` (fetched with [`Paging::fetch`]) as views, and the cursor of the
    /// next page when there is one.
    pub fn page<T, V>(
        &self,
        rows: Vec<T>,
        key: impl Fn(&T) -> (DateTime<Utc>, Uuid),
        view: impl FnMut(T) -> V,
    ) -> (Vec<V>, Option<String>) {
        let (rows, next) = page(rows, self.limit, key);
        (rows.into_iter().map(view).collect(), next)
    }
}

/// Cuts `rows` (fetched one beyond a page) to `limit`; whether there were more.
pub fn truncate<T>(rows: &mut Vec<T>, limit: i64) -> bool {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = rows.len() > limit;
    rows.truncate(limit);
    more
}

/// Splits one extra fetched row off a page: the rows to return and the next cursor (from
/// the last returned row's key) when there are more.
fn page<T>(
    mut rows: Vec<T>,
    limit: i64,
    key: impl Fn(&T) -> (DateTime<Utc>, Uuid),
) -> (Vec<T>, Option<String>) {
    if !truncate(&mut rows, limit) {
        return (rows, None);
    }
    let next = rows.last().map(|r| {
        let (at, id) = key(r);
        encode(at, id)
    });
    (rows, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_with_microseconds_and_reject_junk() {
        let at = DateTime::parse_from_rfc3339("2026-12-01T10:11:12.123456Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("time");
        let id = Uuid::new_v4();
        assert_eq!(decode(&encode(at, id)).expect("decodes"), (at, id));
        for junk in ["", "abc", "!!!", &URL_SAFE_NO_PAD.encode("x|y")] {
            assert_eq!(decode(junk).expect_err(junk).code(), "invalid_cursor");
        }
    }

    #[test]
    fn a_page_with_more_rows_gets_a_cursor() {
        let at = Utc::now();
        let rows: Vec<(DateTime<Utc>, Uuid)> = (0..3).map(|_| (at, Uuid::new_v4())).collect();
        let (page2, next) = page(rows.clone(), 2, |r| *r);
        assert_eq!(page2.len(), 2);
        assert_eq!(next, Some(encode(rows[1].0, rows[1].1)));
        assert_eq!(page(rows, 3, |r| *r).1, None);
        assert!(limit(Some(0)).is_err() && limit(Some(201)).is_err() && limit(None).is_ok());
    }
}
