#!/usr/bin/env python3
"""tests/bench/ledgers/compose.py: turns a pgbench template of tests/bench/ledgers/ into the
pgbench script that issues rowlock's own SQL text, taken from db/ledgers.c at every run.

    compose.py --source db/ledgers.c --template checkpoint.pgbench --ledger-id ID \\
        [--define NAME=VALUE]... > script.sql
    compose.py --session db/pool.c --timeout-ms MS   (prints PGOPTIONS for pgbench)

A template is a pgbench script in which a statement of db/ledgers.c is named instead of written:

    @sql_objects                  the statement `static const char sql_objects[]` (or the SQL
      $1 ARRAY(SELECT ...)        of `struct db_stmt NAME`), each of its parameters $n bound to
      $2 (:s)::bigint             a pgbench expression, one `  $n EXPR` line each

Every other line is copied (pgbench meta-commands, BEGIN, COMMIT...), lines starting with '#'
are dropped, and {NAME} is replaced by a --define value. The statement text is db/ledgers.c's,
macros expanded by the C preprocessor (cc -E, the file's #include lines dropped), so it cannot
drift from what rowlock runs: a template that binds a parameter the statement does not have, or
leaves one unbound, is an error. Each bound expression is parenthesized; the ledger's table
placeholders ({o}, {d}, {t}, {e}, {q}, {c}) become its tables, quoted as PQescapeIdentifier
does. pgbench takes every :name as a variable, even inside a string literal: a literal holding
one (the to_char formats' HH24:MI:SS) becomes an E'' literal with ':' written \\x3A, the same
constant once parsed.

--session prints the settings rowlock gives each pooled connection (the SET statements of
db/pool.c, %d being the statement timeout in ms), as PGOPTIONS for pgbench's sessions: e.g.
plan_cache_mode, which decides whether PostgreSQL re-plans a statement at every execution.
"""

import argparse
import os
import re
import subprocess
import sys

TABLES = {
    "o": "objects_%d",
    "d": "displays_%d",
    "t": "transactions_%d",
    "e": "events_%d",
    "q": "events_%d_offset",
    "c": "checkpoints_%d",
}

C_STRING = r'"(?:[^"\\]|\\.)*"'


def die(msg):
    print("compose.py: error: %s" % msg, file=sys.stderr)
    sys.exit(1)


def c_unescape(lit):
    body = lit[1:-1]
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 1
            nxt = body[i]
            out.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}.get(nxt, None))
            if out[-1] is None:
                die("unsupported escape \\%s in a C string" % nxt)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def statements(source):
    """name -> SQL text of every sql_* string and db_stmt of source."""
    with open(source, encoding="utf-8") as f:
        text = "".join(line for line in f if not line.lstrip().startswith("#include"))
    cc = os.environ.get("CC", "cc")
    try:
        pre = subprocess.run(
            [cc, "-E", "-P", "-x", "c", "-"], input=text, capture_output=True, text=True
        )
    except OSError as e:
        die("cannot run %s: %s" % (cc, e))
    if pre.returncode != 0:
        die("%s -E failed on %s: %s" % (cc, source, pre.stderr.strip()[:500]))
    out = {}
    strings = r"((?:%s\s*)+)" % C_STRING
    for m in re.finditer(r"static\s+const\s+char\s+(\w+)\[\]\s*=\s*" + strings + ";", pre.stdout):
        out[m.group(1)] = "".join(c_unescape(s) for s in re.findall(C_STRING, m.group(2)))
    stmt = r"static\s+const\s+struct\s+db_stmt\s+(\w+)\s*=\s*\{\s*" + C_STRING + r"\s*,\s*"
    for m in re.finditer(stmt + strings + r",\s*(\d+)\s*\}", pre.stdout):
        out[m.group(1)] = "".join(c_unescape(s) for s in re.findall(C_STRING, m.group(2)))
    if not out:
        die("no statements found in %s" % source)
    return out


def session_options(source, timeout_ms):
    """PGOPTIONS ("-c name=value ...") from the SET statements in the strings of source."""
    with open(source, encoding="utf-8") as f:
        text = f.read()
    # each C string: adjacent literals joined
    groups = re.findall(r"(?:%s\s*)+" % C_STRING, text)
    strings = [
        "".join(c_unescape(lit) for lit in re.findall(C_STRING, g))
        for g in groups
        if "SET " in g
    ]
    out = []
    pattern = r"SET\s+(TIME\s+ZONE\s+'([^']*)'|(\w+)\s*(?:=|TO)\s*([^;]+))"
    for m in (m for one in strings for m in re.finditer(pattern, one)):
        if m.group(2) is not None:
            out.append("-c TimeZone=%s" % m.group(2))
        else:
            value = m.group(4).strip().replace("%d", str(timeout_ms))
            if not re.fullmatch(r"[\w.]+", value):
                die("%s: cannot pass SET %s = %s as an option" % (source, m.group(3), value))
            out.append("-c %s=%s" % (m.group(3), value))
    if not out:
        die("no SET statement found in %s" % source)
    return " ".join(out)


def quote_ident(name):
    return '"' + name.replace('"', '""') + '"'


def escape_colons(sql):
    """Rewrites each '...' literal holding :name as E'...' with ':' as \\x3A."""

    def fix(m):
        prefix, value = m.group(1), m.group(2).replace("''", "'")
        if not re.search(r":[A-Za-z0-9_]", value):
            return m.group(0)
        if prefix:
            die("an E'' literal holding a colon (write it plainly): %s" % m.group(0))
        value = value.replace("\\", "\\\\").replace("'", "''").replace(":", "\\x3A")
        return "E'" + value + "'"

    return re.sub(r"(\b[Ee])?'((?:[^']|'')*)'", fix, sql)


def compose(template, stmts, ledger_id, defines):
    def define(text):
        def one(m):
            if m.group(1) not in defines:
                die("%s: {%s} has no --define" % (template, m.group(1)))
            return defines[m.group(1)]

        return re.sub(r"\{([A-Z][A-Z0-9_]*)\}", one, text)

    with open(template, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if not line.startswith("#")]
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith("@"):
            if line.strip():
                out.append(escape_colons(define(line)) if not line.startswith("\\") else line)
            continue
        name = line[1:].strip()
        if name not in stmts:
            die("%s: db/ledgers.c has no statement %s" % (template, name))
        binds = {}
        while i < len(lines) and re.match(r"^\s+\$\d+\s", lines[i]):
            m = re.match(r"^\s+\$(\d+)\s+(.*)$", lines[i])
            binds[int(m.group(1))] = define(m.group(2).strip())
            i += 1
        sql = stmts[name]
        params = {int(p) for p in re.findall(r"\$(\d+)", sql)}
        if params != set(binds):
            die(
                "%s: %s has parameters %s, the template binds %s: update the template to the "
                "statement of db/ledgers.c" % (template, name, sorted(params), sorted(binds))
            )
        sql = re.sub(r"\$(\d+)", lambda m: "(" + binds[int(m.group(1))] + ")", sql)

        def table(m):
            if m.group(1) not in TABLES:
                die("%s: unknown table placeholder {%s}" % (name, m.group(1)))
            return "rowlock." + quote_ident(TABLES[m.group(1)] % ledger_id)

        sql = re.sub(r"\{([a-z])\}", table, sql)
        out.append("-- %s (db/ledgers.c)" % name)
        out.append(escape_colons(sql) + ";")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source")
    ap.add_argument("--template")
    ap.add_argument("--ledger-id", type=int)
    ap.add_argument("--session", metavar="POOL_C", help="print PGOPTIONS from db/pool.c")
    ap.add_argument("--timeout-ms", type=int, default=5000)
    ap.add_argument("--define", action="append", default=[])
    ap.add_argument("--list", action="store_true", help="print the statements found and exit")
    a = ap.parse_args()
    if a.session:
        print(session_options(a.session, a.timeout_ms))
        return 0
    if a.source is None:
        die("--source is required")
    stmts = statements(a.source)
    if a.list:
        for k, v in sorted(stmts.items()):
            print("%s: %s" % (k, v))
        return 0
    if a.template is None or a.ledger_id is None:
        die("--template and --ledger-id are required")
    defines = {}
    for d in a.define:
        k, sep, v = d.partition("=")
        if not sep:
            die("--define wants NAME=VALUE, not %s" % d)
        defines[k] = v
    sys.stdout.write(compose(a.template, stmts, a.ledger_id, defines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
