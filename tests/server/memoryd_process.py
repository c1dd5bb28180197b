"""memoryd_process: runs the real memoryd binary for an end-to-end test.

TestDatabase creates a throw-away PostgreSQL database (CREATE DATABASE
memoryd_test_<random> through psql on MEMORYD_TEST_PG_URL) and drops it
again (DROP DATABASE ... WITH (FORCE)). MemorydProcess starts memoryd on
127.0.0.1:0, reads the bound port from its JSON log on stderr (kept for
diagnostics), and stops it with SIGTERM, returning the exit code.
MemorydInstance puts the two together.

Only the standard library and the psql client (postgresql-client) are used.
"""

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

PG_URL_ENV = "MEMORYD_TEST_PG_URL"
REDIS_URL_ENV = "MEMORYD_TEST_REDIS_URL"
SERVING_MSG = "memoryd serving"


class SetupError(Exception):
    """The test environment is not usable (no database URL, psql failed, ...)."""


def test_pg_url():
    """The admin PostgreSQL URL `make test` passes, or SetupError saying how to get one."""
    url = os.environ.get(PG_URL_ENV, "").strip()
    if not url:
        raise SetupError(
            f"{PG_URL_ENV} is not set: this end-to-end test needs the PostgreSQL that "
            "`make test` starts. Run `make test`, or by hand: `bash scripts/devstack.sh start "
            "&& source .local/env && bazel test //tests/server:reflection_test "
            f"--test_env={PG_URL_ENV}=$MEMORYD_PG_URL --test_env={REDIS_URL_ENV}=$MEMORYD_REDIS_URL`"
        )
    return url


def test_redis_url():
    """MEMORYD_TEST_REDIS_URL, or "" (memoryd then runs with its in-process cache only)."""
    return os.environ.get(REDIS_URL_ENV, "").strip()


def with_dbname(url, dbname):
    """url with its database replaced by dbname (URI or key=value conninfo)."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urllib.parse.urlsplit(url)
        query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
                 if k != "dbname"]
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + dbname,
                                        urllib.parse.urlencode(query), parts.fragment))
    # conninfo: libpq takes the last value of a repeated keyword.
    return f"{url} dbname='{dbname}'"


def _psql(url, sql):
    env = dict(os.environ, PGCONNECT_TIMEOUT="10")
    try:
        r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                           timeout=60)
    except FileNotFoundError:
        raise SetupError("psql not found: apt-get install postgresql-client") from None
    except subprocess.TimeoutExpired:
        raise SetupError(f"psql timed out running: {sql}") from None
    if r.returncode != 0:
        raise SetupError(f"psql failed ({r.returncode}) running: {sql}\n{r.stderr.strip()}")


class TestDatabase:
    """A database of its own for one test run; drop() (or the with block) removes it."""

    __test__ = False  # not a unittest/pytest test class

    def __init__(self, admin_url=None):
        self.admin_url = admin_url or test_pg_url()
        self.name = f"memoryd_test_{os.getpid()}_{secrets.token_hex(4)}"
        _psql(self.admin_url, f"CREATE DATABASE {self.name}")
        self.url = with_dbname(self.admin_url, self.name)

    def drop(self):
        if self.name:
            name, self.name = self.name, None
            _psql(self.admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.drop()


def find_memoryd(path=None):
    """The memoryd binary: path if given, else $MEMORYD_BIN, the test's runfiles
    ($TEST_SRCDIR/$TEST_WORKSPACE/service/memoryd), or bazel-bin in the repo."""
    candidates = [path, os.environ.get("MEMORYD_BIN")]
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        candidates.append(os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "memoryd"),
                                       "service", "memoryd"))
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    candidates.append(os.path.join(repo, "bazel-bin", "service", "memoryd"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    raise SetupError("memoryd binary not found (tried: %s); build //service:memoryd"
                     % ", ".join(c for c in candidates if c))


class MemorydProcess:
    """One memoryd process on 127.0.0.1:<free port>."""

    def __init__(self, binary, pg_url, redis_url="", args=(), shutdown_grace=2):
        self.binary = binary
        self.argv = [binary, "--listen=127.0.0.1:0", f"--pg-url={pg_url}",
                     f"--shutdown-grace={shutdown_grace}"]
        if redis_url:
            self.argv.append(f"--redis-url={redis_url}")
        self.argv += list(args)
        # memoryd refuses to start without token keys: unless the caller
        # brought its own, make a throw-away key with `memoryd token keygen`.
        self.keys_dir = None
        if not any(a.startswith("--jwks") for a in self.argv):
            import tempfile
            self.keys_dir = tempfile.mkdtemp(prefix="memoryd-keys-",
                                             dir=os.environ.get("TEST_TMPDIR"))
            jwks = os.path.join(self.keys_dir, "jwks.json")
            key = os.path.join(self.keys_dir, "signing.jwk")
            subprocess.run([binary, "token", "keygen", "--kid", "e2e-1", "--private", key,
                            "--jwks", jwks], check=True, stdout=subprocess.DEVNULL)
            self.argv += [f"--jwks={jwks}", f"--signing-key={key}"]
        self.proc = None
        self.port = None
        self.returncode = None
        self._lines = []
        self._lock = threading.Lock()
        self._serving = threading.Event()
        self._reader = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def log(self):
        """Everything memoryd wrote to stderr so far."""
        with self._lock:
            return "".join(self._lines)

    def log_records(self):
        """The stderr lines that parse as JSON objects."""
        out = []
        for line in self.log().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def _read_stderr(self):
        for line in iter(self.proc.stderr.readline, ""):
            with self._lock:
                self._lines.append(line)
            if self.port is None:
                try:
                    rec = json.loads(line)
                except ValueError:
                    rec = None
                if isinstance(rec, dict) and rec.get("msg") == SERVING_MSG and "port" in rec:
                    self.port = int(rec["port"])
                    self._serving.set()
        self._serving.set()  # EOF: wake start() if memoryd died first

    def start(self, timeout=20.0):
        """Starts memoryd and waits for its "memoryd serving" line. Raises
        SetupError, with the log, if it exits or times out first."""
        # Only our flags configure it: drop a developer's MEMORYD_* settings.
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=sys.stderr,
                                     stderr=subprocess.PIPE, text=True, errors="replace",
                                     env=env)
        self._reader = threading.Thread(target=self._read_stderr, name="memoryd-stderr",
                                        daemon=True)
        self._reader.start()
        self._serving.wait(timeout)
        if self.port is None:
            rc = self.proc.poll()
            if rc is None:
                self.kill()
                why = f"did not log {SERVING_MSG!r} within {timeout:g} s"
            else:
                self._close_pipe()
                self.returncode = rc
                why = f"exited with status {rc} before serving"
            raise SetupError(f"memoryd {why}\ncommand: {self._shown_argv()}\n"
                             f"--- memoryd log ---\n{self.log()}--- end of log ---")
        return self

    def _shown_argv(self):
        # The PostgreSQL URL may hold a password: show only its shape.
        return " ".join("--pg-url=<url>" if a.startswith("--pg-url=") else a for a in self.argv)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Sends sig and waits up to timeout seconds. Returns the exit code
        (negative: killed by that signal), or None when it had to be
        SIGKILLed after the timeout."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        self._close_pipe()
        self.returncode = self.proc.returncode
        return self.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close_pipe()

    def _close_pipe(self):
        """After exit: the reader reaches EOF, then the pipe is closed."""
        if self._reader:
            self._reader.join(5)
        reader_done = self._reader is None or not self._reader.is_alive()
        if self.proc is not None and self.proc.stderr and reader_done:
            self.proc.stderr.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class MemorydInstance:
    """A fresh database plus a memoryd serving it; close() stops memoryd
    (SIGTERM, returning its exit code) and drops the database."""

    def __init__(self, binary=None, args=(), start_timeout=20.0):
        self.db = TestDatabase()
        try:
            self.process = MemorydProcess(find_memoryd(binary), self.db.url, test_redis_url(),
                                          args)
            self.process.start(start_timeout)
        except BaseException:
            if getattr(self, "process", None):
                self.process.kill()
            self.db.drop()
            raise
        self.exit_code = None

    @property
    def address(self):
        return self.process.address

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Stops memoryd (once) and returns its exit code; the database stays."""
        if self.exit_code is None:
            self.exit_code = self.process.stop(sig, timeout)
        return self.exit_code

    def close(self):
        try:
            return self.stop()
        finally:
            self.process.kill()
            self.db.drop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
