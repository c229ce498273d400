//! Every table the migrations leave has its module here, named for it (or for its family),
//! and every module is either a table's or one of the few that work across tables: a new
//! table without a home, or a module nobody can place, fails this test.

use std::collections::BTreeSet;
use std::path::Path;

/// Tables whose module is named for their family rather than for the table itself.
const FAMILY: &[(&str, &str)] = &[
    ("alert_deliveries", "alert_incidents"),
    ("audit_log", "audit"),
    ("channel_connections", "connections"),
    ("channel_failures", "dead_letters"),
    ("idempotency_keys", "idempotency"),
    ("inbound_events", "inbox"),
    ("inbound_tombstones", "customer_erasures"),
    ("revoked_tokens", "users"),
];

/// Modules that own no table: their statements span several (a purge, a report, a key
/// rotation) or they hold the crate's machinery.
const ACROSS: &[&str] = &[
    "crypto",
    "error",
    "explain",
    "export",
    "layout",
    "lib",
    "rekey",
    "report_metrics",
    "retention",
];

/// The tables the migrations create and do not drop, in the order they run.
fn tables() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the migrations directory")
        .map(|e| e.expect("a migration").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    let mut live = BTreeSet::new();
    for file in files {
        let sql = std::fs::read_to_string(&file).expect("a readable migration");
        let words: Vec<String> = sql
            .split(|c: char| c.is_whitespace() || c == '(' || c == ';')
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        for (i, w) in words.iter().enumerate() {
            if w != "table" || i == 0 {
                continue;
            }
            let verb = words[i - 1].as_str();
            let mut name = words.get(i + 1).cloned().unwrap_or_default();
            if name == "if" {
                // `IF [NOT] EXISTS name`
                name = words
                    .iter()
                    .skip(i + 2)
                    .find(|w| *w != "not" && *w != "exists")
                    .cloned()
                    .unwrap_or_default();
            }
            match verb {
                "create" => {
                    live.insert(name);
                }
                "drop" => {
                    live.remove(&name);
                }
                _ => {}
            }
        }
    }
    live
}

/// The crate's modules: `src/<name>.rs` and `src/<name>/mod.rs`.
fn modules() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    std::fs::read_dir(src)
        .expect("the source directory")
        .map(|e| e.expect("a source entry").path())
        .filter_map(|p| {
            if p.is_dir() && p.join("mod.rs").exists() {
                p.file_name().map(|n| n.to_string_lossy().into_owned())
            } else if p.extension().is_some_and(|e| e == "rs") {
                p.file_stem().map(|n| n.to_string_lossy().into_owned())
            } else {
                None
            }
        })
        .collect()
}

fn owner(table: &str) -> &str {
    FAMILY
        .iter()
        .find(|(t, _)| *t == table)
        .map_or(table, |(_, m)| m)
}

/// The module's source, folder modules included.
fn source(module: &str) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let file = src.join(format!("{module}.rs"));
    if file.exists() {
        return std::fs::read_to_string(file).expect("a readable module");
    }
    std::fs::read_dir(src.join(module))
        .expect("a folder module")
        .map(|e| std::fs::read_to_string(e.expect("a file").path()).expect("a readable file"))
        .collect()
}

#[test]
fn every_table_has_its_module_and_every_module_its_place() {
    let tables = tables();
    assert!(tables.contains("expert_queue"), "{tables:?}");
    assert!(!tables.is_empty());
    let modules = modules();
    for table in &tables {
        let module = owner(table);
        assert!(
            modules.contains(module),
            "table {table} has no module: add src/{module}.rs (or name its family in FAMILY)"
        );
        assert!(
            source(module).contains(table.as_str()),
            "module {module} names no statement on its table {table}"
        );
    }
    let owners: BTreeSet<&str> = tables.iter().map(|t| owner(t)).collect();
    for module in &modules {
        assert!(
            owners.contains(module.as_str()) || ACROSS.contains(&module.as_str()),
            "module {module} owns no table the migrations leave and is not one of ACROSS"
        );
    }
    for (table, _) in FAMILY {
        assert!(
            tables.contains(*table),
            "FAMILY names {table}, which no migration leaves"
        );
    }
}
