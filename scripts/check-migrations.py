#!/usr/bin/env python3
"""The expand/contract lint of migrations/ (docs/OPERATIONS.md, "Schema changes during a
rolling deploy"). Run it through scripts/check-migrations.sh, which finds the previous
release; this file does the SQL.

During a deploy the previous release keeps running on the new schema, so a migration may add
but must not take away or change what that release reads and writes, and must not hold a lock
that stops it for the length of a table scan or rewrite. Flagged, on a table (or other object)
that an earlier migration created:

  drop-table       DROP TABLE
  drop-column      ALTER TABLE … DROP COLUMN
  alter-drop       ALTER TABLE … DROP CONSTRAINT / DEFAULT / NOT NULL / IDENTITY / EXPRESSION,
                   ALTER TYPE … DROP ATTRIBUTE
  drop-object      DROP VIEW / TYPE / FUNCTION / SEQUENCE / TRIGGER / … (not indexes)
  drop-index       DROP INDEX without CONCURRENTLY (ACCESS EXCLUSIVE on its table), or of a
                   unique index (the previous release's ON CONFLICT may need it)
  rename           any ALTER … RENAME (table, column, constraint, index, type, enum value)
  alter-type       ALTER COLUMN … [SET DATA] TYPE
  set-not-null     ALTER COLUMN … SET NOT NULL
  add-not-null     ADD COLUMN … NOT NULL without DEFAULT
  add-rewrite      ADD COLUMN that rewrites the table: a volatile DEFAULT, serial, identity,
                   GENERATED … STORED
  add-constraint   ADD CONSTRAINT CHECK / FOREIGN KEY without NOT VALID, UNIQUE / PRIMARY KEY /
                   EXCLUDE without USING INDEX (a scan or index build under lock), and CHECK /
                   UNIQUE / PRIMARY KEY on an added column (REFERENCES on one is fine: nothing
                   to scan while it is all NULL)
  create-index     CREATE INDEX without CONCURRENTLY
  do-block         a DO block whose body changes the schema (it is not looked into)

The lock rules (create-index, add-constraint, add-rewrite, and drop-index without CONCURRENTLY)
do not apply to SMALL_TABLES, whose rows are bounded by the number of orgs, users or connections:
a lock on them lasts milliseconds. What breaks the previous release applies to every table.

A flagged statement passes when a comment before it (after the previous statement) or inside
it says

  -- expand-contract: allow <why this is safe for the previous release and for the lock>

Never allowable (a migration that fails, or breaks every existing database):

  concurrently     CREATE / DROP INDEX CONCURRENTLY or REINDEX CONCURRENTLY in a migration
                   that is not `-- no-transaction` (its very first line) with that statement
                   alone: sqlx runs it in a transaction otherwise, which Postgres refuses
  bad-allowance    an allowance without a reason
  edited           a migration the previous release has, changed or deleted (sqlx compares
                   checksums: every existing database would refuse to migrate)
  out-of-order     a new migration older than the previous release's newest

Usage (scripts/check-migrations.sh passes --base):
  check-migrations.py --base REV   the migrations that REV does not have, and edits to those it has
  check-migrations.py --all        every migration; those flagged in GRANDFATHERED are reported
                                   and pass, any other flagged one fails
  check-migrations.py --self-test  the rules against SQL snippets that must pass or fail
"""

import argparse
import hashlib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIGRATIONS = "migrations"

# Migrations that shipped before this lint existed, with what it finds in them (`--all`
# prints it). They are never edited: sqlx stores each migration's checksum, so an allowance
# comment added now would make every existing database refuse to migrate. A new migration is
# never added here; it carries its allowances instead.
GRANDFATHERED = {
    # CREATE INDEX inbound_events_sweep (inbound_events from init), DROP INDEX.
    "20261129000005_inbox_sweep_index.sql",
    # The past one that broke a rolling deploy: DROP TABLE idempotency_keys and CREATE TABLE
    # again with other columns; DROP/CREATE INDEX on expert_queue, messages, outbox,
    # org_event_seq; CHECK constraints added without NOT VALID; outbox_status_check dropped.
    "20261201000007_expert_release.sql",
    # Three CREATE INDEX on channel_failures.
    "20261201000008_outbound_delivery.sql",
    # Four CREATE INDEX on inbound_events, DROP INDEX.
    "20261201000009_inbound_hardening.sql",
    # CREATE INDEX on cron_runs and expert_queue; cron_runs_status_check dropped and added
    # again without NOT VALID.
    "20261201000010_scheduler.sql",
}

# Tables whose size is bounded by the number of orgs, users or connections (or fixed): an
# index build, a scan or a rewrite of one holds its lock for milliseconds. A table whose rows
# grow with traffic (messages, events, customers, cron_runs, …) never goes here.
SMALL_TABLES = {
    "orgs", "org_members", "users", "channel_connections", "org_event_seq", "relay_lease",
}
LOCK_RULES = {"create-index", "add-constraint", "add-rewrite"}

ALLOW_RE = re.compile(r"expand-contract:\s*allow\b[ \t:]*(.*)", re.IGNORECASE)
NO_TX = "-- no-transaction"

# Functions whose value differs per row: as an added column's DEFAULT, Postgres rewrites the
# table under ACCESS EXCLUSIVE to fill it in (a constant or now() is stored once instead).
VOLATILE = {
    "gen_random_uuid", "uuid_generate_v1", "uuid_generate_v1mc", "uuid_generate_v4",
    "random", "clock_timestamp", "timeofday", "nextval", "statement_timestamp",
    "txid_current", "uuidv4", "uuidv7",
}
SERIAL = {"serial", "serial2", "serial4", "serial8", "smallserial", "bigserial"}
DDL_IN_BODY = re.compile(
    r"\b(alter\s+table|drop\s|rename\s|create\s+(unique\s+)?index)", re.IGNORECASE
)

RULES = {
    "drop-table": "drops a table the previous release uses",
    "drop-column": "drops a column the previous release may read or write",
    "alter-drop": "takes away something the previous release may rely on",
    "drop-object": "drops an object the previous release may use",
    "drop-index": "DROP INDEX",
    "rename": "renames something the previous release names",
    "alter-type": "changes a column's type: a rewrite under ACCESS EXCLUSIVE, and the previous "
    "release decodes the old type",
    "set-not-null": "SET NOT NULL scans the table under ACCESS EXCLUSIVE, and the previous "
    "release's INSERTs that leave the column out fail",
    "add-not-null": "ADD COLUMN … NOT NULL without DEFAULT: the previous release's INSERTs fail "
    "(and it fails outright on a table with rows)",
    "add-rewrite": "ADD COLUMN that rewrites the whole table under ACCESS EXCLUSIVE",
    "add-constraint": "a constraint checked or indexed over the whole table under lock",
    "create-index": "CREATE INDEX without CONCURRENTLY blocks writes to the table while it builds",
    "do-block": "a DO block that changes the schema (the lint cannot look into it)",
}
HARD = {"concurrently", "bad-allowance", "edited", "out-of-order"}


class Finding:
    def __init__(self, path, line, rule, message, excerpt=""):
        self.path, self.line, self.rule = path, line, rule
        self.message, self.excerpt = message, excerpt

    def __str__(self):
        where = f"{self.path}:{self.line}" if self.line else self.path
        text = f"{where}: {self.rule}: {self.message}"
        if self.excerpt:
            text += f"\n    {self.excerpt}"
        return text


# --- tokens and statements ----------------------------------------------------------------


class Tok:
    __slots__ = ("kind", "text", "line", "pos")

    def __init__(self, kind, text, line, pos):
        self.kind, self.text, self.line, self.pos = kind, text, line, pos

    @property
    def up(self):
        return self.text.upper() if self.kind == "word" else None


class Statement:
    def __init__(self):
        self.tokens = []
        self.comments = []  # (line, text) from after the previous statement to this one's end
        self.start = None
        self.end = None

    @property
    def line(self):
        return self.tokens[0].line if self.tokens else 0

    def excerpt(self, sql):
        text = " ".join(sql[self.start:self.end].split())
        return text if len(text) <= 110 else text[:107] + "..."


def tokenize(sql):
    """Splits SQL into statements of tokens, keeping the comments around each. Strings,
    quoted identifiers, dollar-quoted bodies and comments never split a statement."""
    stmts, cur = [], Statement()
    i, n, line = 0, len(sql), 1

    def push(kind, text, start):
        if cur.start is None:
            cur.start = start
        cur.tokens.append(Tok(kind, text, line_at[0], start))

    line_at = [1]
    while i < n:
        c = sql[i]
        line_at[0] = line
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            cur.comments.append((line, sql[i + 2:j]))
            i = j
        elif sql.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if sql.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif sql.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            cur.comments.append((line, sql[i + 2:j - 2]))
            line += sql.count("\n", i, j)
            i = j
        elif c == "'" or (c in "eE" and sql.startswith("'", i + 1)):
            backslash = c != "'"
            j = i + (2 if backslash else 1)
            while j < n:
                if backslash and sql[j] == "\\":
                    j += 2
                elif sql[j] == "'":
                    if sql.startswith("''", j):
                        j += 2
                    else:
                        break
                else:
                    j += 1
            push("string", sql[i:j + 1], i)
            line += sql.count("\n", i, j + 1)
            i = j + 1
        elif c == '"':
            j = i + 1
            while j < n:
                if sql.startswith('""', j):
                    j += 2
                elif sql[j] == '"':
                    break
                else:
                    j += 1
            push("qident", sql[i + 1:j].replace('""', '"'), i)
            i = j + 1
        elif c == "$" and re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", sql[i:]):
            tag = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", sql[i:]).group(0)
            j = sql.find(tag, i + len(tag))
            j = n if j < 0 else j
            push("dollar", sql[i + len(tag):j], i)
            line += sql.count("\n", i, j + len(tag))
            i = j + len(tag)
        elif c.isalpha() or c == "_":
            m = re.match(r"[A-Za-z_][A-Za-z0-9_$]*", sql[i:])
            push("word", m.group(0), i)
            i += len(m.group(0))
        elif c.isdigit():
            m = re.match(r"[0-9][0-9.eE]*", sql[i:])
            push("number", m.group(0), i)
            i += len(m.group(0))
        elif c == ";":
            if cur.tokens:
                cur.end = i + 1
                stmts.append(cur)
                cur = Statement()
            i += 1
        else:
            push("punct", c, i)
            i += 1
    if cur.tokens:
        cur.end = n
        stmts.append(cur)
    return stmts, cur.comments if not cur.tokens else []


def ident(tok):
    """An identifier as Postgres stores it: unquoted ones fold to lower case."""
    if tok is None:
        return None
    if tok.kind == "qident":
        return tok.text
    if tok.kind == "word":
        return tok.text.lower()
    return None


def split_top(tokens, sep=","):
    """Splits at `sep` outside parentheses."""
    parts, cur, depth = [], [], 0
    for t in tokens:
        if t.kind == "punct" and t.text == "(":
            depth += 1
        elif t.kind == "punct" and t.text == ")":
            depth -= 1
        if depth == 0 and t.kind == "punct" and t.text == sep:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    return [p for p in parts if p]


def top_level(tokens):
    """The tokens outside parentheses."""
    out, depth = [], 0
    for t in tokens:
        if t.kind == "punct" and t.text == "(":
            depth += 1
        elif t.kind == "punct" and t.text == ")":
            depth -= 1
        elif depth == 0:
            out.append(t)
    return out


def words(tokens):
    return [t.up for t in tokens]


def has_seq(tokens, *seq):
    ws = words(tokens)
    return any(ws[i:i + len(seq)] == list(seq) for i in range(len(ws) - len(seq) + 1))


def qualified_name(tokens, i):
    """Reads `a.b.c` from tokens[i]; returns (last part, index after)."""
    name = ident(tokens[i]) if i < len(tokens) else None
    i += 1
    while i + 1 < len(tokens) and tokens[i].kind == "punct" and tokens[i].text == ".":
        name = ident(tokens[i + 1])
        i += 2
    return name, i


def skip_words(tokens, i, *options):
    """Skips any of the (multi-word) options at i, in any order, each at most once."""
    options = [o.split() for o in options]
    progress = True
    while progress:
        progress = False
        for o in options:
            if words(tokens[i:i + len(o)]) == o:
                i += len(o)
                progress = True
    return i


# --- the rules ------------------------------------------------------------------------------


class Catalog:
    """What every migration so far created that a rule needs to know: the unique indexes, and
    each index's table."""

    def __init__(self):
        self.unique = set()
        self.index_table = {}


class Scope:
    """What the file being linted has created so far: on those, anything goes (the previous
    release does not know them)."""

    def __init__(self, catalog):
        self.new = set()
        self.unique = catalog.unique
        self.index_table = catalog.index_table


OBJECT_KINDS = [
    "MATERIALIZED VIEW", "FOREIGN TABLE", "TABLE", "INDEX", "VIEW", "TYPE", "FUNCTION",
    "PROCEDURE", "SEQUENCE", "TRIGGER", "SCHEMA", "DOMAIN", "EXTENSION", "RULE", "POLICY",
    "AGGREGATE", "OPERATOR", "COLLATION",
]


def object_kind(tokens, i):
    ws = words(tokens)
    for k in OBJECT_KINDS:
        parts = k.split()
        if ws[i:i + len(parts)] == parts:
            return k, i + len(parts)
    return None, i


def check_statement(st, scope):
    """Returns [(rule, detail)] for one statement, and records what it creates in scope."""
    t = st.tokens
    ws = words(t)
    out = []
    if not ws or ws[0] is None:
        return out

    if ws[0] == "CREATE":
        i = skip_words(t, 1, "OR REPLACE", "UNIQUE", "UNLOGGED", "TEMP", "TEMPORARY",
                       "GLOBAL", "LOCAL", "CONSTRAINT", "RECURSIVE")
        unique = "UNIQUE" in ws[1:i]
        kind, i = object_kind(t, i)
        if kind == "INDEX":
            concurrently = ws[i:i + 1] == ["CONCURRENTLY"]
            i = skip_words(t, i, "CONCURRENTLY", "IF NOT EXISTS")
            name = table = None
            if ws[i:i + 1] != ["ON"]:
                name, i = qualified_name(t, i)
            if ws[i:i + 1] == ["ON"]:
                i = skip_words(t, i + 1, "ONLY")
                table, _ = qualified_name(t, i)
                if not concurrently and table not in scope.new and table not in SMALL_TABLES:
                    out.append(("create-index", f"on {table}, which an earlier migration created"))
            if name:
                scope.new.add(name)
                scope.index_table[name] = table
                if unique:
                    scope.unique.add(name)
        elif kind:
            i = skip_words(t, i, "IF NOT EXISTS")
            name, _ = qualified_name(t, i)
            if name:
                scope.new.add(name)
        return out

    if ws[0] == "DROP":
        kind, i = object_kind(t, 1)
        if not kind:
            return out
        concurrently = ws[i:i + 1] == ["CONCURRENTLY"]
        i = skip_words(t, i, "CONCURRENTLY", "IF EXISTS")
        names = []
        for part in split_top(t[i:]):
            name, _ = qualified_name(part, 0)
            if name and name.upper() not in ("CASCADE", "RESTRICT"):
                names.append(name)
        old = [n for n in names if n not in scope.new]
        if not old:
            return out
        listed = ", ".join(old)
        if kind == "TABLE":
            out.append(("drop-table", listed))
        elif kind == "INDEX":
            locking = [n for n in old if scope.index_table.get(n) not in SMALL_TABLES]
            if not concurrently and locking:
                listed = ", ".join(locking)
                out.append(("drop-index", f"{listed} without CONCURRENTLY: ACCESS EXCLUSIVE on "
                            "its table until the migration commits"))
            unique = [n for n in old if n in scope.unique]
            if unique:
                out.append(("drop-index", f"{', '.join(unique)} is unique: the previous "
                            "release's ON CONFLICT may name its columns"))
        else:
            out.append(("drop-object", f"{kind} {listed}"))
        for n in names:
            scope.unique.discard(n)
        return out

    if ws[0] == "ALTER":
        kind, i = object_kind(t, 1)
        if not kind:
            return out
        i = skip_words(t, i, "IF EXISTS", "ONLY")
        name, i = qualified_name(t, i)
        if name in scope.new:
            return out
        if ws[i:i + 1] == ["*"]:
            i += 1
        body = t[i:]
        if "RENAME" in words(top_level(body)):
            out.append(("rename", f"{kind} {name}"))
            return out
        if kind != "TABLE":
            if kind == "TYPE" and has_seq(body, "ALTER", "ATTRIBUTE") and "TYPE" in words(body[2:]):
                out.append(("alter-type", f"an attribute of type {name}"))
            elif "DROP" in words(top_level(body)):
                out.append(("alter-drop", f"{kind} {name}"))
            return out
        for action in split_top(body):
            out += check_table_action(action, name, scope)
        if name in SMALL_TABLES:
            out = [(rule, detail) for rule, detail in out if rule not in LOCK_RULES]
        return out

    if ws[0] == "DO":
        bodies = [x.text for x in t if x.kind in ("dollar", "string")]
        if any(DDL_IN_BODY.search(b) for b in bodies):
            out.append(("do-block", "look at it, then allow it or split it into plain statements"))
        return out

    return out


def check_table_action(a, table, scope):
    ws = words(a)
    top = words(top_level(a))
    out = []
    if ws[0] == "ADD":
        i = skip_words(a, 1, "COLUMN", "IF NOT EXISTS")
        first = ws[i] if i < len(ws) else None
        if first in ("CONSTRAINT", "CHECK", "UNIQUE", "PRIMARY", "FOREIGN", "EXCLUDE"):
            cname = None
            if first == "CONSTRAINT":
                cname = ident(a[i + 1]) if i + 1 < len(a) else None
                first = ws[i + 2] if i + 2 < len(ws) else None
            if first in ("CHECK", "FOREIGN") and not has_seq(top_level(a), "NOT", "VALID"):
                out.append(("add-constraint", f"{first} on {table} without NOT VALID: add it "
                            "NOT VALID, VALIDATE CONSTRAINT in a later migration"))
            elif first in ("UNIQUE", "PRIMARY", "EXCLUDE") and not has_seq(a, "USING", "INDEX"):
                out.append(("add-constraint", f"{first} on {table} builds its index under lock: "
                            "CREATE UNIQUE INDEX CONCURRENTLY, then ADD CONSTRAINT … USING INDEX"))
            if cname:
                scope.new.add(cname)
            return out
        col = ident(a[i]) if i < len(a) else None
        rest = a[i + 1:]
        rw = words(top_level(rest))
        has_default = "DEFAULT" in rw
        if has_seq(top_level(rest), "NOT", "NULL") and not has_default and "GENERATED" not in rw:
            out.append(("add-not-null", f"{table}.{col}"))
        type_word = ws[i + 1].lower() if i + 1 < len(ws) and ws[i + 1] else ""
        if type_word in SERIAL:
            out.append(("add-rewrite", f"{table}.{col} is {type_word}: every row gets a value"))
        elif "GENERATED" in rw and ("IDENTITY" in rw or "STORED" in rw):
            out.append(("add-rewrite", f"{table}.{col} is generated: every row gets a value"))
        elif has_default:
            d = rw.index("DEFAULT")
            called = {x.text.lower() for x in rest[d:] if x.kind == "word"}
            volatile = sorted(called & VOLATILE)
            if volatile:
                out.append(("add-rewrite", f"{table}.{col} DEFAULT {volatile[0]}() differs per row"))
        if "UNIQUE" in rw or has_seq(top_level(rest), "PRIMARY", "KEY"):
            out.append(("add-constraint", f"{table}.{col} UNIQUE/PRIMARY KEY builds an index "
                        "under lock"))
        if "CHECK" in rw:
            out.append(("add-constraint", f"{table}.{col}'s CHECK is checked against every row "
                        "under ACCESS EXCLUSIVE: add the column, then the CHECK NOT VALID"))
        return out
    if ws[0] == "DROP":
        i = skip_words(a, 1, "IF EXISTS")
        what = ws[i] if i < len(ws) else None
        if what == "CONSTRAINT":
            i = skip_words(a, i + 1, "IF EXISTS")
            cname = ident(a[i]) if i < len(a) else None
            if cname not in scope.new:
                out.append(("alter-drop", f"constraint {cname} of {table} (the previous release "
                            "may name it, or count on what it checks)"))
        else:
            i = skip_words(a, 1, "COLUMN", "IF EXISTS")
            out.append(("drop-column", f"{table}.{ident(a[i]) if i < len(a) else '?'}"))
        return out
    if ws[0] == "ALTER":
        i = skip_words(a, 1, "COLUMN")
        col = ident(a[i]) if i < len(a) else None
        rest = ws[i + 1:]
        if rest[:1] == ["TYPE"] or rest[:3] == ["SET", "DATA", "TYPE"]:
            out.append(("alter-type", f"{table}.{col}"))
        elif rest[:3] == ["SET", "NOT", "NULL"]:
            out.append(("set-not-null", f"{table}.{col}"))
        elif rest[:1] == ["DROP"]:
            out.append(("alter-drop", f"{' '.join(w for w in rest[:3] if w)} on {table}.{col} "
                        "(the previous release may count on it)"))
        return out
    return out


def lint_text(path, sql, scope):
    """Every finding in one migration: [(Finding, allowed reason or None)]."""
    stmts, trailing = tokenize(sql)
    results = []
    hard = []
    concurrent = [s for s in stmts if "CONCURRENTLY" in words(s.tokens)
                  and words(s.tokens)[:1] in (["CREATE"], ["DROP"], ["REINDEX"])]
    for s in concurrent:
        if not sql.startswith(NO_TX) or len(stmts) != 1:
            hard.append(Finding(path, s.line, "concurrently",
                                "CONCURRENTLY needs a migration of its own whose very first line "
                                f"is `{NO_TX}` (sqlx runs any other in a transaction, and "
                                "Postgres runs several statements sent at once in one)",
                                s.excerpt(sql)))
    for s in stmts:
        allowance = None
        for line, text in s.comments:
            m = ALLOW_RE.search(text)
            if m:
                allowance = m.group(1).strip()
                if not allowance:
                    hard.append(Finding(path, line, "bad-allowance",
                                        "an allowance says why: `-- expand-contract: allow "
                                        "<reason>`"))
                    allowance = None
        for rule, detail in check_statement(s, scope):
            f = Finding(path, s.line, rule, f"{RULES[rule]}: {detail}", s.excerpt(sql))
            results.append((f, allowance))
    for line, text in trailing:
        if ALLOW_RE.search(text):
            hard.append(Finding(path, line, "bad-allowance", "an allowance with no statement after it"))
    return results, hard


def lint_files(paths, contents, selected):
    """Lints `selected` (names) among all migrations in order; every earlier one is read for
    its unique indexes. Returns {name: (results, hard)}."""
    catalog = Catalog()
    out = {}
    for name in paths:
        scope = Scope(catalog)
        results, hard = lint_text(f"{MIGRATIONS}/{name}", contents[name], scope)
        if name in selected:
            out[name] = (results, hard)
    return out


# --- modes ------------------------------------------------------------------------------


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def working_migrations():
    d = os.path.join(ROOT, MIGRATIONS)
    names = sorted(f for f in os.listdir(d) if f.endswith(".sql"))
    contents = {}
    for f in names:
        with open(os.path.join(d, f), encoding="utf-8") as fh:
            contents[f] = fh.read()
    return names, contents


def report(linted, grandfathered=frozenset()):
    """Prints the findings; returns how many fail."""
    failing = 0
    for name, (results, hard) in linted.items():
        for f in hard:
            print(f"FAIL {f}")
            failing += 1
        for f, allowed in results:
            if allowed:
                print(f"allowed ({allowed}) {f}")
            elif name in grandfathered:
                print(f"grandfathered {f}")
            else:
                print(f"FAIL {f}")
                failing += 1
    return failing


def mode_base(base):
    names, contents = working_migrations()
    try:
        listing = git("ls-tree", base, f"{MIGRATIONS}/")
    except subprocess.CalledProcessError as e:
        print(f"check-migrations: cannot list {MIGRATIONS}/ at {base}: {e.stderr.strip()}",
              file=sys.stderr)
        return 2
    shipped = {}
    for row in listing.splitlines():
        meta, path = row.split("\t", 1)
        if path.endswith(".sql"):
            shipped[os.path.basename(path)] = meta.split()[2]
    failing = 0
    # Read as bytes: the checksum sqlx keeps is over the file's bytes.
    for name, sha in sorted(shipped.items()):
        if name not in contents:
            print(f"FAIL {MIGRATIONS}/{name}: edited: deleted, but the previous release applied it")
            failing += 1
            continue
        with open(os.path.join(ROOT, MIGRATIONS, name), "rb") as fh:
            data = fh.read()
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != sha:
            print(f"FAIL {MIGRATIONS}/{name}: edited: changed since the previous release "
                  "(sqlx would refuse every database that applied it); add a new migration")
            failing += 1
    new = [n for n in names if n not in shipped]
    newest_shipped = max(shipped) if shipped else ""
    for n in new:
        if n < newest_shipped:
            print(f"FAIL {MIGRATIONS}/{n}: out-of-order: older than the previous release's "
                  f"newest ({newest_shipped}); give it a later timestamp")
            failing += 1
    short = git("rev-parse", "--short", base).strip()
    if not new:
        print(f"check-migrations: no migration is new since the previous release {short}")
    else:
        print(f"check-migrations: {len(new)} migration(s) new since the previous release "
              f"{short}: {', '.join(new)}")
    failing += report(lint_files(names, contents, set(new)))
    if failing:
        print(f"check-migrations: {failing} problem(s); see docs/OPERATIONS.md, "
              "\"Schema changes during a rolling deploy\"")
        return 1
    print("check-migrations: ok")
    return 0


def mode_all():
    names, contents = working_migrations()
    linted = lint_files(names, contents, set(names))
    failing = report(linted, GRANDFATHERED)
    flagged = [n for n, (r, h) in linted.items() if any(not a for _, a in r)]
    needing = [n for n in flagged if n in GRANDFATHERED]
    print(f"check-migrations --all: {len(names)} migrations; would have needed an allowance: "
          f"{', '.join(needing) or 'none'} (grandfathered)")
    stale = sorted(GRANDFATHERED - set(flagged))
    if stale:
        print(f"check-migrations --all: grandfathered but clean or gone, remove from the list: "
              f"{', '.join(stale)}")
        failing += len(stale)
    if failing:
        print(f"check-migrations --all: {failing} problem(s)")
        return 1
    print("check-migrations --all: ok")
    return 0


# --- self-test ----------------------------------------------------------------------------

EARLIER = """
CREATE TABLE orders (id uuid PRIMARY KEY, note text, total integer);
CREATE TABLE orgs (id uuid PRIMARY KEY, name text);
CREATE INDEX orgs_name ON orgs (name);
CREATE UNIQUE INDEX orders_note_key ON orders (note);
CREATE INDEX orders_total ON orders (total);
CREATE TYPE order_status AS ENUM ('open', 'closed');
"""

# (what, SQL, the rules it must raise; [] = passes). Each runs after EARLIER.
CASES = [
    ("add a nullable column", "ALTER TABLE orders ADD COLUMN shipped_at timestamptz;", []),
    ("add NOT NULL with a constant default",
     "ALTER TABLE orders ADD COLUMN n integer NOT NULL DEFAULT 0;", []),
    ("add NOT NULL with now()",
     "ALTER TABLE orders ADD COLUMN at timestamptz NOT NULL DEFAULT now();", []),
    ("add NOT NULL without default", "ALTER TABLE orders ADD COLUMN n integer NOT NULL;",
     ["add-not-null"]),
    ("two actions, the second NOT NULL",
     "ALTER TABLE orders ADD COLUMN a int, ADD COLUMN b text NOT NULL;", ["add-not-null"]),
    ("add with a volatile default",
     "ALTER TABLE orders ADD COLUMN k uuid NOT NULL DEFAULT gen_random_uuid();", ["add-rewrite"]),
    ("add a bigserial", "ALTER TABLE orders ADD COLUMN seq bigserial;", ["add-rewrite"]),
    ("drop a column", "ALTER TABLE orders DROP COLUMN note;", ["drop-column"]),
    ("drop a column, bare", "ALTER TABLE IF EXISTS public.orders DROP note;", ["drop-column"]),
    ("drop a table", "DROP TABLE orders;", ["drop-table"]),
    ("drop and recreate a table",
     "DROP TABLE IF EXISTS orders;\nCREATE TABLE orders (id uuid);", ["drop-table"]),
    ("rename a column", "ALTER TABLE orders RENAME COLUMN note TO remark;", ["rename"]),
    ("rename a table", 'ALTER TABLE "orders" RENAME TO purchases;', ["rename"]),
    ("rename an enum value", "ALTER TYPE order_status RENAME VALUE 'open' TO 'new';", ["rename"]),
    ("add an enum value", "ALTER TYPE order_status ADD VALUE IF NOT EXISTS 'held';", []),
    ("change a type", "ALTER TABLE orders ALTER COLUMN total TYPE bigint;", ["alter-type"]),
    ("change a type, long form", "ALTER TABLE orders ALTER total SET DATA TYPE bigint;",
     ["alter-type"]),
    ("set not null", "ALTER TABLE orders ALTER COLUMN note SET NOT NULL;", ["set-not-null"]),
    ("drop a default", "ALTER TABLE orders ALTER COLUMN note DROP DEFAULT;", ["alter-drop"]),
    ("set a default", "ALTER TABLE orders ALTER COLUMN note SET DEFAULT '';", []),
    ("index an existing table", "CREATE INDEX orders_note ON orders (note);", ["create-index"]),
    ("unique index on an existing table, no name",
     "CREATE UNIQUE INDEX ON orders (total);", ["create-index"]),
    ("index concurrently, alone and outside a transaction",
     "-- no-transaction\n-- Big table.\nCREATE INDEX CONCURRENTLY orders_note ON orders (note);",
     []),
    ("index concurrently inside a transaction",
     "CREATE INDEX CONCURRENTLY orders_note ON orders (note);", ["concurrently"]),
    ("index concurrently next to another statement",
     "-- no-transaction\nCREATE INDEX CONCURRENTLY orders_note ON orders (note);\n"
     "ALTER TABLE orders ADD COLUMN x int;", ["concurrently"]),
    ("a table and its index in one migration",
     "CREATE TABLE refunds (id uuid PRIMARY KEY, order_id uuid NOT NULL);\n"
     "CREATE INDEX refunds_order ON refunds (order_id);\n"
     "ALTER TABLE refunds ADD COLUMN amount integer NOT NULL;", []),
    ("drop an index", "DROP INDEX orders_total;", ["drop-index"]),
    ("drop an index concurrently", "-- no-transaction\nDROP INDEX CONCURRENTLY orders_total;", []),
    ("drop a unique index concurrently",
     "-- no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS orders_note_key;", ["drop-index"]),
    ("check constraint NOT VALID, then validated",
     "ALTER TABLE orders ADD CONSTRAINT total_positive CHECK (total > 0) NOT VALID;\n"
     "ALTER TABLE orders VALIDATE CONSTRAINT total_positive;", []),
    ("check constraint validated at once",
     "ALTER TABLE orders ADD CONSTRAINT total_positive CHECK (total > 0);", ["add-constraint"]),
    ("foreign key validated at once",
     "ALTER TABLE orders ADD CONSTRAINT o_fk FOREIGN KEY (id) REFERENCES orders (id);",
     ["add-constraint"]),
    ("unique constraint from an index built concurrently",
     "ALTER TABLE orders ADD CONSTRAINT orders_note_u UNIQUE USING INDEX orders_note_key;", []),
    ("drop a constraint", "ALTER TABLE orders DROP CONSTRAINT orders_total_check;",
     ["alter-drop"]),
    ("drop a type", "DROP TYPE order_status;", ["drop-object"]),
    ("a small table: index, check, drop index",
     "CREATE INDEX orgs_name2 ON orgs (lower(name));\n"
     "ALTER TABLE orgs ADD COLUMN tz text NOT NULL DEFAULT 'UTC' CHECK (tz <> '');\n"
     "DROP INDEX orgs_name;", []),
    ("a small table: what breaks the previous release still counts",
     "ALTER TABLE orgs DROP COLUMN name, ADD COLUMN plan text NOT NULL;",
     ["drop-column", "add-not-null"]),
    ("add a column with a CHECK", "ALTER TABLE orders ADD COLUMN z text CHECK (z <> '');",
     ["add-constraint"]),
    ("add a column with a foreign key",
     "ALTER TABLE orders ADD COLUMN parent uuid REFERENCES orders (id) ON DELETE SET NULL;", []),
    ("allowed, with a reason",
     "-- The previous release stopped reading note in 20261201000016.\n"
     "-- expand-contract: allow nothing has read note since release 41\n"
     "ALTER TABLE orders DROP COLUMN note;", []),
    ("an allowance covers only the next statement",
     "-- expand-contract: allow nothing reads note\nALTER TABLE orders DROP COLUMN note;\n"
     "ALTER TABLE orders DROP COLUMN total;", ["drop-column"]),
    ("an allowance without a reason", "-- expand-contract: allow\nDROP TABLE orders;",
     ["bad-allowance", "drop-table"]),
    ("keywords in strings and comments are not statements",
     "-- DROP TABLE orders;\n/* ALTER TABLE orders DROP COLUMN note; */\n"
     "COMMENT ON TABLE orders IS 'we never DROP TABLE orders; honest';\n"
     "UPDATE orders SET note = E'it''s \\'; DROP TABLE orders' WHERE note IS NULL;", []),
    ("a backfill", "UPDATE orders SET total = 0 WHERE total IS NULL;", []),
    ("a function body is not looked into",
     "CREATE OR REPLACE FUNCTION f() RETURNS void AS $fn$ BEGIN DELETE FROM orders; END $fn$ "
     "LANGUAGE plpgsql;", []),
    ("a DO block that changes the schema",
     "DO $$ BEGIN EXECUTE 'ALTER TABLE orders DROP COLUMN note'; END $$;", ["do-block"]),
]


def self_test():
    failed = 0
    for what, sql, want in CASES:
        catalog = Catalog()
        lint_text("earlier.sql", EARLIER, Scope(catalog))
        results, hard = lint_text("case.sql", sql, Scope(catalog))
        got = sorted({f.rule for f in hard} | {f.rule for f, allowed in results if not allowed})
        if got != sorted(set(want)):
            failed += 1
            print(f"FAIL {what}: want {sorted(set(want)) or 'pass'}, got {got or 'pass'}")
            for f in hard + [f for f, _ in results]:
                print(f"    {f}")
        else:
            print(f"ok   {what}: {', '.join(got) or 'passes'}")
    # The shipped history parses and every rule's message exists.
    names, contents = working_migrations()
    lint_files(names, contents, set(names))
    print(f"check-migrations --self-test: {len(CASES) - failed} of {len(CASES)} cases ok")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--base", metavar="REV", help="the previous release's commit")
    g.add_argument("--all", action="store_true", help="lint every migration")
    g.add_argument("--self-test", action="store_true", help="run the lint's own tests")
    args = p.parse_args()
    if args.self_test:
        return self_test()
    if args.all:
        return mode_all()
    return mode_base(args.base)


if __name__ == "__main__":
    sys.exit(main())
