"""A newcomer's mistakes give one line from `python -m ingest` (issue 26): what is wrong
and where (the configuration key), a non-zero exit, no traceback (that goes to
`log.file`), and -- for the brokers, the whitelist and the registry -- before Spark
starts. Real processes: the command line in a subprocess, a real broker and registry."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from broker.client.admin import AdminClient, NewTopic
from broker.processes import ROOT


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sources(broker, registry):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("cli-errors", 1)])
    return broker.bootstrap, registry.url


def ingest(tmp_path, *args: str, **settings: str) -> subprocess.CompletedProcess:
    settings.setdefault("root", str(tmp_path / "root"))
    settings.setdefault("log.file", str(tmp_path / "ingest.log"))
    cmd = [sys.executable, "-m", "ingest", "--config", str(ROOT / "conf" / "ingest.yaml")]
    for key, value in settings.items():
        cmd += ["--set", f"{key}={value}"]
    return subprocess.run(
        [*cmd, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )


def assert_one_line(done: subprocess.CompletedProcess, *words: str, code: int = 2) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "Spark" not in done.stderr  # nothing of Spark's start-up: it never started
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


CASES = {
    # name: (command, settings that make the mistake, words the line must hold)
    "brokers": (["run"], {"bootstrap.servers": "127.0.0.1:{closed}"}, ["no broker answered", "127.0.0.1:{closed}", "(bootstrap.servers)"]),
    "registry": (["run"], {"registry.url": "http://127.0.0.1:{closed}"}, ["schema registry", "http://127.0.0.1:{closed}", "(registry.url)"]),
    "whitelist": (["run"], {"topics.whitelist": "page-viewz"}, ["topics.whitelist", "page-viewz", "matches none", "cli-errors"]),
    "root": (["run"], {"root": "{file}/warehouse"}, ["the root", "{file}/warehouse", "(root)"]),
    "metastore": (
        ["register"],
        {"warehouse.registrar": "hive", "warehouse.metastore.uris": "thrift://127.0.0.1:{closed}"},
        ["no metastore answered", "thrift://127.0.0.1:{closed}", "(warehouse.metastore.uris)"],
    ),
    "type": (["run"], {"limits.max.records.per.task": "lots"}, ["'lots'", "limits.max.records.per.task"]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_one_line_error(case, sources, tmp_path):
    bootstrap, registry = sources
    command, mistake, words = CASES[case]
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    fill = {"closed": _closed_port(), "file": a_file}
    settings = {"bootstrap.servers": bootstrap, "registry.url": registry}
    settings.update({k: v.format(**fill) for k, v in mistake.items()})
    done = ingest(tmp_path, *command, **settings)
    assert_one_line(done, *(w.format(**fill) for w in words))


def test_a_mistake_found_by_the_command_is_one_line_and_its_traceback_is_in_the_log(
    sources, tmp_path
):
    bootstrap, registry = sources
    done = ingest(
        tmp_path, "rerun", "--run", "20200101T000000.000Z-00000000",
        **{"bootstrap.servers": bootstrap, "registry.url": registry},
    )  # fmt: skip
    line = assert_one_line(done, "no committed run 20200101T000000.000Z-00000000")
    assert "ingest.log" not in line  # a mistake in what was asked for: exit 2
    log = (tmp_path / "ingest.log").read_text()
    assert "Traceback" in log and "no committed run" in log


def test_a_failure_is_one_line_naming_the_log(tmp_path, monkeypatch, capsys):
    import logging

    from ingest import cli

    def fail(*args):
        raise RuntimeError("the namenode said no\nand a second line")

    monkeypatch.setattr(cli, "_command", fail)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        code = cli.main(
            ["--config", str(ROOT / "conf" / "ingest.yaml"), "--set", f"log.file={tmp_path}/x.log", "history"]
        )  # fmt: skip
    finally:
        for h in root.handlers[:]:
            if h not in handlers:
                root.removeHandler(h)
                h.close()
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err
    assert code == 1
    assert err == f"error: RuntimeError: the namenode said no (traceback in {tmp_path}/x.log)\n"
    assert "Traceback" in (tmp_path / "x.log").read_text()
