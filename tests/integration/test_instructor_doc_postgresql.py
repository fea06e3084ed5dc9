"""The instructors' doc followed with a PostgreSQL gradebook made from nothing as step 4
prints it: every test of test_instructor_doc.py, after step 4's PostgreSQL commands have
run as printed on this host (Debian's package and its cluster): `apt-get install`,
`pg_ctlcluster ... start`, `createuser --pwprompt` with a new password typed at its prompt,
`createdb -O`, that password into the instructor's `~/.pgpass`, and the course config's
`db_url` without it. Every later nbgrader command, formgrader included, finds the password
in `~/.pgpass` (no $PGPASSWORD is set), as the doc says.

The doc's role and database (`grader`, `gradebook`) get this run's own names (the process
id and a random tag), so that runs side by side on one host do not clash; the cluster's
version, name and port are the ones `pg_lsclusters` lists. Afterwards the role and its
databases are dropped, and the cluster is stopped again when this run started it and it
holds no other database. A file of its own so that pytest-xdist (`--dist loadfile`, a file
per worker) follows the doc with each gradebook at the same time: each takes minutes."""

import os
import re
import secrets
import shutil
import subprocess

import pytest
from clusterparts import require, require_postgres
from instructordoc import (
    INSTRUCTOR,
    POSTGRES_CONFIG,
    POSTGRES_ROLE,
    POSTGRES_START,
)
from test_instructor_doc import *  # noqa: F403 (its tests, collected here too)
from test_instructor_doc import follow_the_doc

DEBIAN = ("apt-get", "pg_lsclusters", "pg_ctlcluster", "createuser", "createdb", "dropdb",
          "dropuser", "runuser")


class SystemPostgres:
    """Step 4's PostgreSQL commands, run as printed on this host's cluster, with names of
    this run's own; `follow_the_doc` calls `run` for each of them in the doc's order."""

    def __init__(self):
        tag = f"{os.getpid() % 100000}x{secrets.token_hex(3)}"
        self.role, self.database = f"rpgrader{tag}", f"rpgradebook{tag}"
        self.batch = f"rpbatch{tag}"  # step 8's second gradebook, named by $RESIDUAL_PACK_DB_URL
        self.password = "pw-" + secrets.token_hex(12)
        self.started = False
        self.cluster = None

    def require(self):
        require_postgres()  # the server's programs and the driver (the `postgres` extra)
        missing = [name for name in DEBIAN if not shutil.which(name)]
        if missing:
            require("PostgreSQL", f"no {', '.join(missing)} (Debian's postgresql package)",
                    "POSTGRES_REQUIRED")
        self.cluster = self._cluster()
        if self.cluster is None:
            require("PostgreSQL", "pg_lsclusters lists no cluster", "POSTGRES_REQUIRED")

    @staticmethod
    def _cluster():
        """(version, name, port, online) of the first cluster pg_lsclusters lists."""
        done = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True,
                              text=True)
        for line in done.stdout.splitlines():
            fields = line.split()
            if len(fields) >= 4:
                return fields[0], fields[1], fields[2], fields[3] == "online"
        return None

    def fill(self, printed):
        """The doc's command with this host's cluster and this run's names and password."""
        version, name, port, _ = self.cluster
        text = printed.replace("pg_ctlcluster 15 main", f"pg_ctlcluster {version} {name}")
        text = text.replace(":5432", f":{port}").replace("PASSWORD", self.password)
        text = re.sub(r"\bgradebook\b", self.database, re.sub(r"\bgrader\b", self.role, text))
        return text

    def run(self, w, printed):
        was_online = self._cluster()[3]
        answer = f"{self.password}\n{self.password}\n" if printed == POSTGRES_ROLE else None
        # a session of its own: no terminal, so createuser reads the password from stdin
        done = subprocess.run(["sh", "-c", self.fill(printed)], cwd=w.course, env=w.env,
                              input=answer, capture_output=True, text=True, timeout=900,
                              start_new_session=True)
        w.transcript.append(f"[{INSTRUCTOR}] $ {printed}  (exit {done.returncode})")
        said = (done.stdout + done.stderr).strip()
        if said:
            w.note(said.replace(self.password, "PASSWORD")[-300:])
        running = printed == POSTGRES_START and "already running" in said  # the doc says so
        if done.returncode != 0 and not running:
            raise AssertionError(f"{printed} failed:\n{said}")
        if printed == POSTGRES_START and not was_online:
            self.started = True
        if printed == POSTGRES_CONFIG:
            self._configured(w)
        return done

    def url(self, database):
        _, _, port, _ = self.cluster
        return (f"postgresql+psycopg2://{self.role}:{self.password}@localhost:{port}/"
                f"{database}")

    def _configured(self, w):
        """The gradebook the course's config now names; and step 8's second database
        (not a command of step 4), named with its password by $RESIDUAL_PACK_DB_URL."""
        _, _, port, _ = self.cluster
        w.postgres = f"{self.role}@localhost:{port}/{self.database}"
        w.password = self.password
        w.gradebook = self.url(self.database)
        subprocess.run(["runuser", "-u", "postgres", "--", "createdb", "-O", self.role,
                        self.batch], check=True, capture_output=True, cwd="/")
        w.env["RESIDUAL_PACK_DB_URL"] = w.batch_gradebook = self.url(self.batch)
        assert "PGPASSWORD" not in w.env  # nbgrader must find it in ~/.pgpass

    def stop(self, w):
        def postgres(*args):
            return subprocess.run(["runuser", "-u", "postgres", "--", *args], cwd="/",
                                  capture_output=True, text=True, timeout=120)

        if self.cluster is None:
            return
        for database in (self.database, self.batch):
            postgres("dropdb", "--if-exists", "--force", database)
        postgres("dropuser", "--if-exists", self.role)
        others = postgres("psql", "-Atc", "SELECT datname FROM pg_database WHERE NOT "
                          "datistemplate AND datname <> 'postgres'").stdout.split()
        if self.started and not others:
            version, name, _, _ = self.cluster
            subprocess.run(["pg_ctlcluster", version, name, "stop"], capture_output=True)


@pytest.fixture(scope="module", params=["postgresql"])
def followed(request, tmp_path_factory):
    yield from follow_the_doc(request, tmp_path_factory, postgres=SystemPostgres())
