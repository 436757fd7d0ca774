"""confluent-kafka producing and consuming N 100-byte messages over SASL_SSL (SCRAM-SHA-512,
TLS) vs PLAINTEXT, against one broker serving both listeners, in the same run.

    .venv/bin/python -m bench.bench_security [--messages 1000000]

The certificates come from a CA made for the run (tests/helpers/certs.py). TLS costs the
broker a copy of every fetched byte through user space (no sendfile) and the encryption
itself; SASL costs once per connection.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.bench_clients import consume, produce
from bench.common import report
from broker.processes import BrokerProcess, free_port
from broker.security.credentials import user_entry
from broker.security.scram import MECHANISMS, make_credential
from tests.helpers.certs import TestCA

MECHANISM = "SCRAM-SHA-512"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    n = parser.parse_args().messages
    with tempfile.TemporaryDirectory(prefix="bench-security-") as work:
        work = Path(work)
        ca = TestCA(work / "ca")
        keystore = ca.issue("broker", hosts=["127.0.0.1"]).keystore
        credentials = work / "scram.json"
        credential = make_credential(MECHANISMS[MECHANISM], "bench-pw")
        credentials.write_text(json.dumps({"bench": user_entry({MECHANISM: credential})}))
        plain_port, sasl_port = free_port(), free_port()
        overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{sasl_port}",
            "ssl.keystore.location": str(keystore),
            "sasl.scram.credentials.file": str(credentials),
            "num.partitions": "1",
        }
        secure = {
            "bootstrap.servers": f"127.0.0.1:{sasl_port}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": "bench",
            "sasl.password": "bench-pw",
            "ssl.ca.location": str(ca.pem),
        }
        with BrokerProcess(work / "logs", overrides, port=plain_port, log_path=work / "b.log"):
            plain_bootstrap = f"127.0.0.1:{plain_port}"
            plain_rate, _, p1 = produce({"bootstrap.servers": plain_bootstrap}, n, "plain")
            sasl_rate, _, p2 = produce(secure, n, "secure")
            plain_consume, _ = consume(plain_bootstrap, n, "plain")
            sasl_consume, _ = consume(secure["bootstrap.servers"], n, "secure", secure)
            del p1, p2
    report(f"produce {n:,} x 100 B", sasl_rate, plain_rate, "msg/s", "PLAINTEXT")
    report(f"consume {n:,} x 100 B", sasl_consume, plain_consume, "msg/s", "PLAINTEXT")


if __name__ == "__main__":
    main()
