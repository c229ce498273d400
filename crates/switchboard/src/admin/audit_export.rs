//! `switchboard admin audit-export`: the audit log, deployment-wide, to stdout, on the
//! sections `GET /audit` streams, row by row as Postgres sends them.

use anyhow::{Context, bail};
use futures::TryStreamExt;
use std::io::Write;
use switchboard_store::PgPool;
use switchboard_store::audit::{self, Filter, RowFormat};
use switchboard_store::export::Snapshot;

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
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let newline = if row == RowFormat::Csv { "\r\n" } else { "\n" };
    let mut snapshot = Snapshot::begin(pool)
        .await
        .context("reading the audit log")?;
    let mut n = 0u64;
    for section in audit::export_sections(filter, row) {
        let mut rows = snapshot.rows(&section);
        while let Some(line) = rows.try_next().await.context("reading the audit log")? {
            out.write_all(line.as_bytes())?;
            out.write_all(newline.as_bytes())?;
            if section.name != "header" {
                n += 1;
            }
        }
    }
    snapshot.finish().await.context("reading the audit log")?;
    out.flush()?;
    eprintln!("{n} audit rows");
    Ok(())
}
