//! Which environment variable sets which setting, and how its text is read.
//!
//! [`settings!`] declares the configuration's sections and, next to each field, its variable
//! (`grace: Duration = Secs("INBOX_GRACE_SECS")`). The same declaration yields the structs and
//! [`crate::sections::SETTINGS`], the one list that the environment layer, the TOML layers,
//! the error messages, the start-up rules and the OPERATIONS test read: a setting cannot
//! exist without its variable, nor a variable be read that sets nothing. A variable's unit is
//! part of its contract (`INBOX_GRACE_SECS` is seconds, `OUTBOUND_TIMEOUT_MS` milliseconds),
//! so it is declared here once and the code sees only `Duration`s.

use crate::ConfigError;
use figment::value::{Dict, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// Declares `Config`, its section structs and the list of every setting (`SETTINGS`).
///
/// Each field is `name: Type = Read("VARIABLE")`: its TOML key is `[section] name`, its
/// variable `VARIABLE`, read as [`Read`] says.
macro_rules! settings {
    (
        $(#[$meta:meta])*
        pub struct $config:ident {
            $(
                $(#[$section_meta:meta])*
                $section:ident: $Section:ident {
                    $(
                        $(#[$field_meta:meta])*
                        $field:ident: $ty:ty = $read:ident($($arg:expr),+ $(,)?)
                    ),+ $(,)?
                }
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, serde::Deserialize)]
        pub struct $config {
            $( $(#[$section_meta])* pub $section: $Section, )+
        }

        $(
            $(#[$section_meta])*
            #[derive(Debug, Clone, serde::Deserialize)]
            pub struct $Section {
                $( $(#[$field_meta])* pub $field: $ty, )+
            }
        )+

        /// Every setting, in the order declared.
        pub(crate) const SETTINGS: &[$crate::env::Setting] = &[
            $($(
                $crate::env::Setting {
                    section: stringify!($section),
                    key: stringify!($field),
                    read: $crate::env::Read::$read($($arg),+),
                },
            )+)+
        ];
    };
}
pub(crate) use settings;

/// How a variable's text becomes a value. An empty variable counts as unset.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Read {
    /// Taken as it is: names, URLs, addresses, lists, enum names.
    Text(&'static str),
    /// Taken as it is, or from the file `{NAME}_FILE` names (how orchestrators mount
    /// secrets); the file wins.
    Secret(&'static str),
    /// Parsed like a TOML value: numbers and booleans.
    Value(&'static str),
    /// A whole number of milliseconds, into a `Duration`.
    Millis(&'static str),
    /// A whole number of seconds, into a `Duration`.
    Secs(&'static str),
    /// A whole number of hours, into a `Duration`.
    Hours(&'static str),
    /// A whole number of days, into a `Duration`.
    Days(&'static str),
    /// A table with one variable per entry: `{prefix}{NAME}` for each of the names, upper
    /// case with `-` as `_` (`SCHEDULE_DAILY_SUMMARY`). No other entry is accepted.
    Table(&'static str, &'static [&'static str]),
}

/// The unit of a duration variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Millis,
    Secs,
    Hours,
    Days,
}

impl Unit {
    fn one(self) -> Duration {
        match self {
            Unit::Millis => Duration::from_millis(1),
            Unit::Secs => Duration::from_secs(1),
            Unit::Hours => Duration::from_secs(3600),
            Unit::Days => Duration::from_secs(86_400),
        }
    }

    /// `n` of this unit (saturating: a few billion years is as good as forever).
    fn times(self, n: u64) -> Duration {
        match self {
            Unit::Millis => Duration::from_millis(n),
            _ => Duration::from_secs(n.saturating_mul(self.one().as_secs())),
        }
    }

    /// `d` counted in this unit, rounded down: how messages show a bound or a value.
    pub(crate) fn count(self, d: Duration) -> u128 {
        d.as_nanos() / self.one().as_nanos()
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Millis => "milliseconds",
            Unit::Secs => "seconds",
            Unit::Hours => "hours",
            Unit::Days => "days",
        }
    }
}

/// One setting: where it sits (`[section] key` in the TOML files, `config.section.key` in
/// the code) and the variable that sets it.
#[derive(Debug)]
pub(crate) struct Setting {
    pub(crate) section: &'static str,
    pub(crate) key: &'static str,
    pub(crate) read: Read,
}

impl Setting {
    /// The variable; for a table, its prefix.
    pub(crate) fn var(&self) -> &'static str {
        match self.read {
            Read::Text(v)
            | Read::Secret(v)
            | Read::Value(v)
            | Read::Millis(v)
            | Read::Secs(v)
            | Read::Hours(v)
            | Read::Days(v)
            | Read::Table(v, _) => v,
        }
    }

    /// The unit of a duration setting.
    pub(crate) fn unit(&self) -> Option<Unit> {
        match self.read {
            Read::Millis(_) => Some(Unit::Millis),
            Read::Secs(_) => Some(Unit::Secs),
            Read::Hours(_) => Some(Unit::Hours),
            Read::Days(_) => Some(Unit::Days),
            _ => None,
        }
    }

    /// This setting's value in `vars`, if it is set there.
    pub(crate) fn env_value(
        &self,
        vars: &HashMap<String, String>,
    ) -> Result<Option<Value>, ConfigError> {
        if let Read::Table(prefix, names) = self.read {
            let entries: Dict = names
                .iter()
                .filter_map(|name| {
                    let value = vars.get(&table_var(prefix, name))?;
                    (!value.is_empty()).then(|| ((*name).to_owned(), Value::from(value.clone())))
                })
                .collect();
            return Ok((!entries.is_empty()).then(|| Value::from(entries)));
        }
        let var = self.var();
        let mut text = vars.get(var).cloned();
        if let Read::Secret(_) = self.read {
            let file_var = format!("{var}_FILE");
            if let Some(path) = vars.get(&file_var) {
                let secret =
                    std::fs::read_to_string(path).map_err(|source| ConfigError::SecretFile {
                        var: file_var.clone(),
                        path: PathBuf::from(path),
                        source,
                    })?;
                text = Some(secret.trim_end_matches(['\n', '\r']).to_owned());
            }
        }
        let Some(text) = text.filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        let value = match (self.read, self.unit()) {
            (_, Some(unit)) => {
                let n: u64 = text.trim().parse().map_err(|_| {
                    ConfigError::Invalid(format!("{var} must be a whole number of {}", unit.name()))
                })?;
                duration_value(unit.times(n))
            }
            (Read::Value(_), None) => text
                .parse::<Value>()
                .map_err(|_| ConfigError::Invalid(format!("{var} is not a valid value")))?,
            _ => Value::from(text),
        };
        Ok(Some(value))
    }

    /// A TOML file's value for this setting, as the structs read it: durations are written
    /// with their unit (`"30s"`, `"15min"`), and tables hold only the entries they know.
    pub(crate) fn file_value(&self, value: Value) -> Result<Value, FileValueError> {
        if self.unit().is_some() {
            return value
                .as_str()
                .and_then(parse_duration)
                .map(duration_value)
                .ok_or(FileValueError::NotADuration);
        }
        if let Read::Table(_, names) = self.read {
            let Some(entries) = value.as_dict() else {
                return Err(FileValueError::NotATable);
            };
            if let Some(unknown) = entries.keys().find(|k| !names.contains(&k.as_str())) {
                return Err(FileValueError::UnknownEntry {
                    entry: unknown.clone(),
                    known: names,
                });
            }
        }
        Ok(value)
    }
}

/// Why a TOML file's value does not fit its setting.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileValueError {
    #[error(
        "expected a duration with its unit, such as \"500ms\", \"30s\", \"15min\", \"1h\" or \"30d\""
    )]
    NotADuration,
    #[error("expected a table")]
    NotATable,
    #[error("unknown entry {entry} (known: {})", .known.join(", "))]
    UnknownEntry {
        entry: String,
        known: &'static [&'static str],
    },
}

/// The variable of a table entry: `SCHEDULE_` and `daily-summary` → `SCHEDULE_DAILY_SUMMARY`.
/// How the configuration reads a variable a deployment file names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// A setting read from its value.
    Setting,
    /// A secret setting: its value, or the file `{NAME}_FILE` names.
    Secret,
    /// `{NAME}_FILE` of a secret setting: the path of the file that holds it.
    SecretFile,
}

/// Whether `name` is a variable the configuration reads, and how; `None` for one it
/// ignores (a typo in a manifest, a setting that was removed).
pub fn known_variable(name: &str) -> Option<Known> {
    crate::sections::SETTINGS.iter().find_map(|s| match s.read {
        Read::Secret(v) if v == name => Some(Known::Secret),
        Read::Secret(v) if name.strip_suffix("_FILE") == Some(v) => Some(Known::SecretFile),
        Read::Table(prefix, names) => names
            .iter()
            .any(|n| table_var(prefix, n) == name)
            .then_some(Known::Setting),
        _ if s.var() == name => Some(Known::Setting),
        _ => None,
    })
}

pub(crate) fn table_var(prefix: &str, name: &str) -> String {
    format!("{prefix}{}", name.to_ascii_uppercase().replace('-', "_"))
}

/// The setting at `[section] key`.
pub(crate) fn find(section: &str, key: &str) -> Option<&'static Setting> {
    crate::sections::SETTINGS
        .iter()
        .find(|s| s.section == section && s.key == key)
}

/// The variable that sets what is at `path` (as figment reports it), for error messages.
pub(crate) fn var_at(path: &[String]) -> Option<String> {
    let [section, key, rest @ ..] = path else {
        return None;
    };
    let setting = find(section, key)?;
    Some(match (setting.read, rest) {
        (Read::Table(prefix, _), [name, ..]) => table_var(prefix, name),
        _ => setting.var().to_owned(),
    })
}

/// A duration as serde's `Duration` reads it.
fn duration_value(d: Duration) -> Value {
    let mut dict = Dict::new();
    dict.insert("secs".into(), Value::from(d.as_secs()));
    dict.insert("nanos".into(), Value::from(d.subsec_nanos()));
    Value::from(dict)
}

/// `<n><unit>`: `500ms`, `30s`, `15min`, `1h`, `30d` (the units rate limits use too).
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    let (count, unit) = text.split_at(digits);
    unit_times(unit.trim(), count.parse().ok()?)
}

/// `count` of `unit`: `ms`, `s` (`sec`, `second`), `min` (`m`, `minute`), `h` (`hour`) or
/// `d` (`day`).
pub(crate) fn unit_times(unit: &str, count: u64) -> Option<Duration> {
    let secs = match unit {
        "ms" => return Some(Duration::from_millis(count)),
        "s" | "sec" | "second" => 1,
        "m" | "min" | "minute" => 60,
        "h" | "hour" => 3600,
        "d" | "day" => 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(count.saturating_mul(secs)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sections::SETTINGS;
    use std::collections::BTreeSet;

    /// The names SPEC §9 promises outside tools and scripts.
    const SPEC_NAMES: &[&str] = &[
        "DATABASE_URL",
        "REDIS_URL",
        "PORT",
        "APP_ENV",
        "JWT_SECRET",
        "MASTER_ENCRYPTION_KEY",
        "SENTRY_DSN",
        "PUBLIC_BASE_URL",
        "AGENT_URL",
        "SLACK_API_BASE",
        "TWILIO_API_BASE",
        "TELEGRAM_API_BASE",
        "RESEND_API_BASE",
    ];

    /// Variables OPERATIONS lists that are read outside this crate's settings.
    const READ_ELSEWHERE: &[&str] = &["RUST_LOG", "CONFIG_DIR"];

    /// The declared variables, tables as `PREFIX{…}`.
    fn declared() -> BTreeSet<String> {
        SETTINGS
            .iter()
            .map(|s| match s.read {
                Read::Table(prefix, _) => format!("{prefix}{{…}}"),
                _ => s.var().to_owned(),
            })
            .collect()
    }

    /// The variables in the first column of OPERATIONS' configuration table, tables
    /// (`SCHEDULE_{JOB}`) as `PREFIX{…}`.
    fn documented() -> BTreeSet<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/OPERATIONS.md");
        let text = std::fs::read_to_string(path).expect("docs/OPERATIONS.md");
        let table = text
            .split("| variable | default | meaning |")
            .nth(1)
            .expect("the configuration table");
        table
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .flat_map(|line| {
                let first = line.split('|').nth(1).unwrap_or_default();
                first
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(|name| match name.split_once('{') {
                        Some((prefix, _)) => format!("{prefix}{{…}}"),
                        None => name.to_owned(),
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn operations_documents_exactly_the_declared_variables() {
        let declared = declared();
        let documented = documented();
        let undocumented: Vec<_> = declared.difference(&documented).collect();
        assert!(
            undocumented.is_empty(),
            "not in OPERATIONS: {undocumented:?}"
        );
        let unknown: Vec<_> = documented
            .difference(&declared)
            .filter(|n| !READ_ELSEWHERE.contains(&n.as_str()))
            .collect();
        assert!(unknown.is_empty(), "OPERATIONS lists unread: {unknown:?}");
    }

    #[test]
    fn the_spec_names_are_declared() {
        let declared = declared();
        for name in SPEC_NAMES {
            assert!(declared.contains(*name), "{name}");
        }
    }

    #[test]
    fn each_variable_and_place_is_declared_once() {
        let mut vars = BTreeSet::new();
        let mut places = BTreeSet::new();
        for s in SETTINGS {
            assert!(vars.insert(s.var()), "{} twice", s.var());
            assert!(
                places.insert((s.section, s.key)),
                "{}.{} twice",
                s.section,
                s.key
            );
        }
    }

    #[test]
    fn a_duration_variable_names_its_unit() {
        for s in SETTINGS {
            let suffix = match s.unit() {
                None => continue,
                Some(Unit::Millis) => "_MS",
                Some(Unit::Secs) => "_SECS",
                Some(Unit::Hours) => "_HOURS",
                Some(Unit::Days) => "_DAYS",
            };
            assert!(s.var().ends_with(suffix), "{}", s.var());
        }
    }

    #[test]
    fn durations_parse_with_their_unit() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("15min"), Some(Duration::from_secs(900)));
        assert_eq!(parse_duration("72h"), Some(Duration::from_secs(72 * 3600)));
        assert_eq!(
            parse_duration("30d"),
            Some(Duration::from_secs(30 * 86_400))
        );
        assert_eq!(parse_duration("0ms"), Some(Duration::ZERO));
        for bad in ["30", "s", "1.5s", "-1s", "10 fortnights"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
