"""Where the load's metrics go besides the manifest: the node exporter's textfile directory
and a Pushgateway. No Pushgateway can be installed here, so the test listens where one
would and checks what arrives: Prometheus' push protocol (PUT /metrics/job/<job>/<label>/
<value> with the text format), one group per step, so the audit's push never replaces the
load's. A gateway that refuses loses nothing: the file next to the manifest is written."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.parser import text_string_to_metric_families

from broker.processes import ROOT
from ingest import layout, metrics
from ingest.config import load_config
from ingest.job import open_root


class _Gateway(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]]
    status = 200

    def do_PUT(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.append(("PUT", self.path, body))
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def gateway():
    handler = type("Gateway", (_Gateway,), {"received": [], "status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _registry(value: float) -> CollectorRegistry:
    registry = CollectorRegistry()
    Gauge("ingest_run_records", "Records loaded.", ["topic"], registry=registry).labels(
        "clicks"
    ).set(value)
    return registry


def _config(tmp_path, url):
    return load_config(
        ROOT / "conf" / "ingest.yaml",
        [
            f"root={tmp_path / 'root'}",
            f"metrics.pushgateway.url={url}",
            "metrics.pushgateway.job=hourly",
            f"metrics.textfile.dir={tmp_path / 'textfile'}",
        ],
    )


def test_each_step_is_pushed_to_its_own_group_and_written_for_the_node_exporter(tmp_path, gateway):
    handler, url = gateway
    config = _config(tmp_path, url)
    fs = open_root(config)
    run = layout.new_run_id()
    written = metrics.publish(config, fs, run, "load", _registry(42))
    metrics.publish(config, fs, run, "audit", _registry(7))
    assert url in written
    assert [(m, p) for m, p, _ in handler.received] == [
        ("PUT", "/metrics/job/hourly/step/load"),
        ("PUT", "/metrics/job/hourly/step/audit"),
    ]
    (family,) = text_string_to_metric_families(handler.received[0][2].decode())
    assert [(s.labels, s.value) for s in family.samples] == [({"topic": "clicks"}, 42.0)]
    textfile = (tmp_path / "textfile" / metrics.TEXTFILE_NAMES["load"]).read_text()
    assert 'ingest_run_records{topic="clicks"} 42.0' in textfile


def test_a_refusing_gateway_loses_nothing(tmp_path, gateway, caplog):
    handler, url = gateway
    handler.status = 500
    config = _config(tmp_path, url)
    fs = open_root(config)
    run = layout.new_run_id()
    written = metrics.publish(config, fs, run, "load", _registry(3))
    assert url not in written
    assert "could not push the load metrics" in caplog.text
    text = fs.read_bytes(f"{layout.history_dir(run)}/{metrics.LOAD_FILE}").decode()
    assert 'ingest_run_records{topic="clicks"} 3.0' in text
