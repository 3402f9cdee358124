"""A PostgreSQL cluster of a test's own, managed with `pg_ctl` (the binaries pgserver ships), on a TCP port
of loopback: the test can stop it (an outage) and start it again on the same port and data directory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pgserver
from pgserver.utils import ensure_prefix_permissions, ensure_user_exists

from vip.devstack.anvil import free_port
from vip.store.engine import migrate

BIN = Path(pgserver.__file__).parent / "pginstall" / "bin"
# PostgreSQL refuses to run as root: as pgserver does, run it as the `pgserver` system user then.
USER = "pgserver" if os.geteuid() == 0 else None


class OwnPostgres:
    def __init__(self, directory: Path) -> None:
        self.data = directory / "data"
        self.socket_dir = directory / "run"
        self.log = directory / "postgres.log"
        self.port = free_port()
        for folder in (self.data, self.socket_dir):
            folder.mkdir(parents=True, exist_ok=True)
        if USER is not None:
            entry = ensure_user_exists(USER)
            assert entry is not None
            ensure_prefix_permissions(self.data)
            for path in (directory, self.data, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run([str(BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                   "--no-sync"])
        self.start()
        self._psql("CREATE DATABASE vip")
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/vip"
        migrate(self.url)

    @staticmethod
    def _run(command: list[str], check: bool = True) -> None:
        # Output to a file, not a pipe: pg_ctl's server keeps a pipe open and the call would never end.
        with open(os.devnull, "wb") as sink:
            subprocess.run(command, check=check, stdout=sink, stderr=sink, timeout=60, user=USER)

    def _pg_ctl(self, *args: str) -> None:
        self._run([str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", *args])

    def _psql(self, sql: str) -> None:
        self._run([str(BIN / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                   "-d", "postgres", "-c", sql])

    def start(self) -> None:
        options = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg_ctl("-o", options, "start")

    def stop(self) -> None:
        """A fast shutdown: every session is cut, as in a crash or a failover."""
        self._pg_ctl("-m", "fast", "stop")

    def close(self) -> None:
        self._run([str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"], check=False)
