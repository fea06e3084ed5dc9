"""Step 4's PostgreSQL gradebook from nothing, on this host (Debian's package and its
cluster), for the literal instructor test's PostgreSQL run
(tests/integration/test_instructor_literal_wheel.py).

The doc's role and database (`grader`, `gradebook`) get this run's own names (the process
id and a random tag), so that runs side by side on one host do not clash; the cluster's
version, name and port are the ones `pg_lsclusters` lists; the password is a new one, typed
at `createuser --pwprompt`'s prompt. Step 8's batch command writes into a second database
(`batch`), named with its password by $RESIDUAL_PACK_DB_URL, as the doc offers. Afterwards
the role and its databases are dropped, and the cluster is stopped again when this run
started it and it holds no other database."""

import os
import re
import secrets
import shutil
import subprocess

from clusterparts import require, require_postgres

DEBIAN = ("apt-get", "pg_lsclusters", "pg_ctlcluster", "createuser", "createdb", "dropdb",
          "dropuser", "runuser")


class SystemPostgres:
    """This host's cluster, and the names and password of one literal run."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000}x{secrets.token_hex(3)}"
        self.role, self.database = f"rpgrader{tag}", f"rpgradebook{tag}"
        self.batch = f"rpbatch{tag}"  # step 8's second gradebook, named by $RESIDUAL_PACK_DB_URL
        self.password = "pw-" + secrets.token_hex(12)
        self.started = False
        self.cluster = None

    def require(self) -> None:
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

    def fill(self, printed: str) -> str:
        """The doc's command with this host's cluster and this run's names and password."""
        version, name, port, _ = self.cluster
        text = printed.replace("pg_ctlcluster 15 main", f"pg_ctlcluster {version} {name}")
        text = text.replace(":5432", f":{port}").replace("PASSWORD", self.password)
        text = re.sub(r"\bgradebook\b", self.database, re.sub(r"\bgrader\b", self.role, text))
        return text

    def url(self, database: str) -> str:
        _, _, port, _ = self.cluster
        return (f"postgresql+psycopg2://{self.role}:{self.password}@localhost:{port}/"
                f"{database}")

    def make_batch_database(self) -> str:
        """Step 8's second gradebook (not a command of step 4), owned by the run's role;
        returns its URL with the password, for $RESIDUAL_PACK_DB_URL."""
        subprocess.run(["runuser", "-u", "postgres", "--", "createdb", "-O", self.role,
                        self.batch], check=True, capture_output=True, cwd="/")
        return self.url(self.batch)

    def stop(self) -> None:
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
