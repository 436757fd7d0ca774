"""Scraping a Prometheus endpoint in tests, parsed by prometheus_client's own parser."""

from __future__ import annotations

import json
import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from broker.processes import ROOT


class Scrape:
    """One scrape: every sample, by sample name (`kafka_topic_messages_in_total`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[str, list] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples.setdefault(sample.name, []).append(sample)

    def value(self, name: str, default: float | None = None, **labels: str) -> float:
        """The sample `name` whose labels include `labels`; `default` when there is none
        (else KeyError, naming what was there)."""
        for sample in self.samples.get(name, ()):
            if all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
        if default is not None:
            return default
        raise KeyError(f"{name}{labels} not in {[s.labels for s in self.samples.get(name, ())]}")

    def total(self, name: str, **labels: str) -> float:
        """The sum of every sample `name` whose labels include `labels`."""
        return sum(
            s.value
            for s in self.samples.get(name, ())
            if all(s.labels.get(k) == v for k, v in labels.items())
        )


def scrape(url: str) -> Scrape:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return Scrape(answer.read().decode())


DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"


def dashboard_series(prefix: str) -> set[str]:
    """The names of the `prefix`* series docs/grafana-dashboard.json queries."""
    dashboard = json.loads(DASHBOARD.read_text())
    return {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", ())
        for name in re.findall(rf"\b({prefix}[a-z_]+)", target["expr"])
    }
