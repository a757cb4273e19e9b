"""`structgen serve` as a user starts it, for tests: the real command from the checkout
on loopback, its output in a log file, waited for until it listens, stopped at the end."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import httpx

from tests.test_cli import CLI


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class ServerProcess:
    url: str  # http://127.0.0.1:PORT
    pid: int  # the `structgen serve` process; a Ray cluster it started runs under it

    def descendants(self, command_line_part: str) -> list[int]:
        """The pids of the processes under this server whose command line holds
        `command_line_part`: its own workers, never another test's."""
        children: dict[int, list[int]] = {}
        for status in Path("/proc").glob("[0-9]*/stat"):
            try:
                pid, parent = _pid_and_parent(status.read_text())
            except (OSError, ValueError):
                continue  # exited while we looked
            children.setdefault(parent, []).append(pid)
        found, todo = [], list(children.get(self.pid, []))
        while todo:
            pid = todo.pop()
            todo.extend(children.get(pid, []))
            try:
                command_line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if command_line_part in command_line:
                found.append(pid)
        return sorted(found)


def fields_after_comm(stat: str) -> list[str]:
    """/proc/PID/stat (or a thread's): 'pid (comm) state ppid ...' -> [state, ppid, ...];
    comm may hold spaces and parentheses. proc(5) numbers them from 3 (state)."""
    return stat[stat.rindex(")") + 2:].split()


def _pid_and_parent(stat: str) -> tuple[int, int]:
    return int(stat.split(" ", 1)[0]), int(fields_after_comm(stat)[1])


@contextmanager
def serve_process(log: Path, timeout_s: float, args: Sequence[str] = (), **env: str) -> Iterator[ServerProcess]:
    """The server once /health answers; `args`: more `structgen serve` options;
    `env`: extra environment variables."""
    port = free_port()
    full_env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", **env)
    with open(log, "w") as out:
        proc = subprocess.Popen([*CLI, "serve", "--port", str(port), *args], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=full_env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_listening(url, proc, log, timeout_s)
        yield ServerProcess(url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_listening(url: str, proc: subprocess.Popen, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"structgen serve exited: {log.read_text()}"
        assert time.monotonic() < deadline, f"structgen serve did not listen: {log.read_text()}"
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.5)
