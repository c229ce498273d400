//! `switchboard admin audit-export`: the audit log, deployment-wide, to stdout, on the
//! statement `GET /audit` streams with, row by row as Postgres sends them.

use anyhow::{Context, bail};
use futures::TryStreamExt;
use std::io::Write;
use switchboard_store::PgPool;
use switchboard_store::audit::{self, Filter, RowFormat};

/// Writes the rows of `filter` in `format` (`ndjson` or `csv`); how many goes to stderr.
pub async fn run(pool: &PgPool, filter: &Filter, format: &str) -> anyhow::Result<()> {
    if let (Some(since), Some(until)) = (filter.since, filter.until)
        && since >= until
    {
        bail!("--since must be before --until");
    }
    let row = if format == "csv" {
        RowFormat::Csv
    } else {
        RowFormat::Json
    };
    let sql = audit::select_sql(row, false);
    let mut rows = sqlx::query_scalar::<_, String>(&sql)
        .bind(filter.orgs.clone())
        .bind(filter.actor)
        .bind(filter.action.clone())
        .bind(filter.since)
        .bind(filter.until)
        .bind(None::<i64>)
        .bind(None::<i64>)
        .fetch(pool);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if row == RowFormat::Csv {
        write!(out, "{}\r\n", audit::CSV_HEADER)?;
    }
    let newline = if row == RowFormat::Csv { "\r\n" } else { "\n" };
    let mut n = 0u64;
    while let Some(line) = rows.try_next().await.context("reading the audit log")? {
        out.write_all(line.as_bytes())?;
        out.write_all(newline.as_bytes())?;
        n += 1;
    }
    out.flush()?;
    eprintln!("{n} audit rows");
    Ok(())
}
