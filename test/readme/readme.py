"""Runs every example of one document (README.md or a docs/*.md), so that
an example that breaks fails the suite.  test/readme/run calls it for each.

- ```sql blocks run in order, statement by statement, in one session of a
  fresh database (state carries over from block to block).  A statement
  followed on its line by a comment "-- ERROR <SQLSTATE>" must fail with that
  SQLSTATE; every other statement must succeed.
- ```python blocks run as scripts with /usr/bin/python3 (Debian's psycopg),
  with the Python client (clients/python/src) on PYTHONPATH.
- ```javascript blocks run with node, with npm's pg and the Node client as
  built from clients/node (npm ci there if its packages are missing, then
  npm pack: @fencing/client) installed in a scratch directory
  (FENCING_README_NPM_OPTIONAL=1, set by test/matrix: skipped with a note if
  npm cannot reach its registry, instead of failing).
- ```java blocks are compiled and run with Debian's PgJDBC and Spring JDBC; a
  block that imports the Java client (io.github.fencing) gets it compiled from
  clients/java/src/main/java with javac against that PgJDBC (no Maven, no
  network: it works in test/matrix's chroots too); they connect over TCP on
  127.0.0.1 when PGHOST is a socket directory.
- ```go blocks are not run here (machines such as test/matrix's chroots have
  no Go): clients/go/readme_test.go runs them, in `go test` under
  clients/run, which fails rather than skips without a server.
- ```sh and ```text blocks are commands and output shown to the reader (the
  quick start's commands are what CI runs); they are not run here.  A block
  that cannot run on its own (SQL for another setup, such as Citus; a
  fragment of a program) is therefore marked ```text (or ```sh).

Every block sees PGHOST, PGPORT, PGUSER and PGDATABASE of the document's
database.  Usage: readme.py DOCUMENT DATABASE.  Prints "test NAME ... ok" or
"FAILED", NAME being readme_examples for README.md and docs_<name>_examples
for docs/<name>.md; a document without sql, python, javascript or java
blocks prints no test line (README.md must have sql blocks).
"""

import os
import re
import subprocess
import sys
import tempfile

import psycopg

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
EXPECT = re.compile(r"--\s*ERROR\s+([0-9A-Z]{5})")


def statements(sql):
    """Splits SQL text at top-level semicolons; a comment after a semicolon on
    the same line stays with that statement."""
    out, current, i, n = [], [], 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            current.append(sql[i:j])
            i = j
            continue
        if c == "'" or c == '"':
            j = i + 1
            while j < n and not (sql[j] == c and not sql.startswith(c + c, j)):
                j += 2 if sql.startswith(c + c, j) else 1
            current.append(sql[i:j + 1])
            i = j + 1
            continue
        m = re.match(r"\$\w*\$", sql[i:])
        if m:
            tag = m.group(0)
            j = sql.find(tag, i + len(tag))
            j = n if j < 0 else j + len(tag)
            current.append(sql[i:j])
            i = j
            continue
        if c == ";":
            j = sql.find("\n", i)
            j = n if j < 0 else j
            rest = sql[i + 1:j]
            current.append(";" + (rest if rest.strip().startswith("--") else ""))
            i = j if rest.strip().startswith("--") else i + 1
            text = "".join(current).strip()
            if text and text != ";":
                out.append(text)
            current = []
            continue
        current.append(c)
        i += 1
    text = "".join(current).strip()
    if text and not all(line.strip().startswith("--") or not line.strip()
                        for line in text.splitlines()):
        out.append(text)
    return out


def run_sql(conn, block, number):
    failures = []
    for statement in statements(block):
        body = "\n".join(line for line in statement.splitlines()
                         if not line.strip().startswith("--"))
        if not body.strip() or body.strip() == ";":
            continue
        expected = EXPECT.search(statement)
        try:
            conn.execute(body)
            if expected:
                failures.append(f"block {number}: succeeded, expected {expected.group(1)}:\n  {statement}")
        except psycopg.Error as e:
            if not expected or e.sqlstate != expected.group(1):
                failures.append(f"block {number}: {e.sqlstate}: {str(e).strip()}\n  in: {statement}")
                if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                    conn.execute("ROLLBACK")
    return failures


def run_program(kind, code, number, scratch, env):
    path = os.path.join(scratch, f"block{number}")
    if kind == "python":
        command = ["/usr/bin/python3", path + ".py"]
        with open(path + ".py", "w") as f:
            f.write(code)
    elif kind == "javascript":
        command = ["node", path + ".js"]
        with open(path + ".js", "w") as f:
            f.write(code)
    else:  # java: the class is named in the block
        name = re.search(r"public class (\w+)", code).group(1)
        directory = os.path.join(scratch, f"java{number}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, name + ".java"), "w") as f:
            f.write(code)
        jars = ":".join(os.path.join("/usr/share/java", j) for j in (
            "postgresql.jar", "spring3-jdbc.jar", "spring3-core.jar", "spring3-beans.jar",
            "spring3-transaction.jar", "commons-logging.jar"))
        if "io.github.fencing" in code:
            client, failure = java_client(scratch, jars)
            if failure:
                return [f"block {number} (java): {failure}"]
            jars += ":" + client
        compiled = subprocess.run(["javac", "-cp", jars, "-d", directory,
                                   os.path.join(directory, name + ".java")],
                                  capture_output=True, text=True)
        if compiled.returncode != 0:
            return [f"block {number} (java) does not compile:\n{compiled.stderr}"]
        command = ["java", "-cp", jars + ":" + directory, name]
        if os.path.isdir(env.get("PGHOST", "")):
            # PgJDBC speaks TCP (a socket directory would need junixsocket, which
            # Debian's PgJDBC does not bring): the clusters of test/check and
            # test/matrix listen on 127.0.0.1 too.
            env = dict(env, PGHOST="127.0.0.1")
    result = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True,
                            timeout=120)
    sys.stdout.write(result.stdout)
    if result.returncode != 0:
        return [f"block {number} ({kind}) exited {result.returncode}:\n{result.stdout}{result.stderr}"]
    return []


def java_client(scratch, jars):
    """The Java client's classes, compiled once per document from its sources
    (clients/java/src/main/java) against Debian's PgJDBC: (directory, None),
    or (None, the reason it does not build)."""
    out = os.path.join(scratch, "java-client")
    if os.path.isdir(out):
        return out, None
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sources = []
    for top, _, files in os.walk(os.path.join(root, "clients", "java", "src", "main", "java")):
        sources += [os.path.join(top, f) for f in files if f.endswith(".java")]
    if not sources:
        return None, "the Java client's sources (clients/java/src/main/java) are missing"
    os.makedirs(out + ".tmp", exist_ok=True)
    compiled = subprocess.run(["javac", "--release", "17", "-nowarn", "-cp", jars, "-d", out + ".tmp"] + sources,
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        return None, f"the Java client does not build with {jars.split(':')[0]}:\n{compiled.stderr}"
    os.rename(out + ".tmp", out)
    return out, None


# npm's errors when the registry cannot be reached (DNS, refused, timeouts,
# a TLS certificate it cannot verify).
UNREACHABLE = re.compile(r"\b(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ESOCKETTIMEDOUT|"
                         r"ENETUNREACH|EHOSTUNREACH|network timeout|SELF_SIGNED_CERT_IN_CHAIN|"
                         r"DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|"
                         r"UNABLE_TO_VERIFY_LEAF_SIGNATURE|CERT_HAS_EXPIRED)\b")


NODE_CLIENT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "clients", "node")


def node_client(scratch, npm_options=()):
    """The Node client as built from clients/node: npm ci there when its
    packages (typescript) are missing, then npm pack (which builds dist/)
    into scratch.  Returns (tarball, None) or (None, npm's output)."""
    steps = [["npm", "pack", "--loglevel=error", "--pack-destination", scratch]]
    if not os.path.isdir(os.path.join(NODE_CLIENT, "node_modules", "typescript")):
        steps.insert(0, ["npm", "ci", "--loglevel=error", "--no-audit", "--no-fund", *npm_options])
    for step in steps:
        done = subprocess.run(step, cwd=NODE_CLIENT, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            return None, done.stdout + done.stderr
    tarballs = [f for f in os.listdir(scratch) if f.startswith("fencing-client-") and f.endswith(".tgz")]
    return (os.path.join(scratch, tarballs[0]), None) if tarballs else (None, "npm pack made no tarball")


def npm_optional(scratch):
    """With FENCING_README_NPM_OPTIONAL set (test/matrix, in a chroot): installs
    pg and the Node client with short timeouts.  Returns (skip, failures):
    the javascript blocks are skipped, with a note, only if npm could not
    reach its registry; any other npm failure fails the test as it does
    without the variable."""
    timeouts = ("--fetch-timeout=30000", "--fetch-retries=1")
    try:
        client, output = node_client(scratch, timeouts)
        if client is None:
            return unreachable_or_failed(output, "building the Node client (clients/node) failed")
        installed = subprocess.run(["npm", "install", "--loglevel=error", "--no-audit", "--no-fund",
                                    *timeouts, "--prefix", scratch, "pg@8", client],
                                   capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired as e:
        print(f"readme: javascript blocks skipped: {' '.join(e.cmd[:2])} did not finish in {e.timeout:g} s "
              "(npm registry unreachable)")
        return True, []
    if installed.returncode == 0:
        return False, []
    return unreachable_or_failed(installed.stdout + installed.stderr, "npm install pg failed")


def unreachable_or_failed(output, failure):
    """(skip, failures) after npm failed: skip, with a note, if it could not reach its registry."""
    unreachable = UNREACHABLE.search(output)
    if unreachable:
        print(f"readme: javascript blocks skipped: npm cannot reach its registry ({unreachable.group(1)})")
        return True, []
    print(output)
    return False, [failure]


def main():
    readme, database = sys.argv[1], sys.argv[2]
    text = open(readme).read()
    base = os.path.basename(readme)
    is_readme = base == "README.md"
    label = "README" if is_readme else "docs/" + base
    test_name = "readme_examples" if is_readme else \
        "docs_" + re.sub(r"\W", "_", base[:-len(".md")]) + "_examples"
    # python blocks import the Python client from its source tree (docs/clients.md)
    client = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "clients", "python", "src")
    env = dict(os.environ, PGDATABASE=database,
               PYTHONPATH=os.pathsep.join(p for p in (client, os.environ.get("PYTHONPATH")) if p))
    failures, counts = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        skip_javascript = False
        if re.search(r"^```javascript\n", text, re.M):
            if os.environ.get("FENCING_README_NPM_OPTIONAL"):
                skip_javascript, failure = npm_optional(scratch)
                failures += failure
            else:
                client, output = node_client(scratch)
                if client is None:
                    print(output)
                    failures.append("building the Node client (clients/node) failed")
                else:
                    installed = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund",
                                                "--prefix", scratch, "pg@8", client],
                                               capture_output=True, text=True)
                    if installed.returncode != 0:
                        print(installed.stdout + installed.stderr)
                        failures.append("npm install pg failed")
        with psycopg.connect(dbname=database, autocommit=True) as conn:
            for number, match in enumerate(BLOCK.finditer(text), 1):
                kind, code = match.group(1), match.group(2)
                if kind == "sql":
                    failures += run_sql(conn, code, number)
                elif kind == "javascript" and skip_javascript:
                    continue
                elif kind in ("python", "javascript", "java"):
                    failures += run_program(kind, code, number, scratch, env)
                else:
                    continue
                counts[kind] = counts.get(kind, 0) + 1
    if not counts and not failures and not is_readme:
        print(f"{label}: no sql, python, javascript or java blocks")
        return 0
    print(f"{label} blocks run: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    for failure in failures:
        print(f"FAILED ({label}):", failure)
    ok = not failures and (counts.get("sql", 0) > 0 or not is_readme)
    print(f"test {test_name} ... {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
