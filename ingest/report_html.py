"""The audit as a self-contained HTML page: a table per topic-period and, per topic, a chart
of producer vs loaded counts per audit window (inline SVG: no plotting dependency, opens
anywhere)."""

from __future__ import annotations

import html
import time
from collections import defaultdict

from broker.util.clock import SECOND_MS
from ingest.audit import AuditReport, WindowReport

_BAR_W, _GAP, _H = 14, 10, 180


def _hhmm(ms: int) -> str:
    return time.strftime("%m-%d %H:%M", time.gmtime(ms / SECOND_MS))


def _chart(topic: str, windows: list[WindowReport]) -> str:
    peak = max([max(w.produced, w.accounted) for w in windows] + [1])
    width = len(windows) * (2 * _BAR_W + _GAP) + 60
    parts = [
        f'<svg width="{width}" height="{_H + 60}" role="img" aria-label="{html.escape(topic)}: '
        'producer vs loaded per window">'
    ]
    for i, w in enumerate(windows):
        x = 50 + i * (2 * _BAR_W + _GAP)
        for j, (value, color, label) in enumerate(
            ((w.produced, "#4a78b5", "produced"), (w.loaded, "#59a14f", "loaded"))
        ):
            h = round(_H * value / peak)
            parts.append(
                f'<rect x="{x + j * _BAR_W}" y="{_H - h + 10}" width="{_BAR_W - 1}" height="{h}" '
                f'fill="{color}"><title>{_hhmm(w.window_start_ms)} {label}: {value:,}</title></rect>'
            )
        if w.quarantined:
            hq = round(_H * w.quarantined / peak)
            parts.append(
                f'<rect x="{x + _BAR_W}" y="{_H - round(_H * w.loaded / peak) - hq + 10}" '
                f'width="{_BAR_W - 1}" height="{hq}" fill="#e15759"><title>quarantined: '
                f"{w.quarantined:,}</title></rect>"
            )
        if i % 3 == 0:
            parts.append(
                f'<text x="{x}" y="{_H + 28}" font-size="10">{_hhmm(w.window_start_ms)[6:]}</text>'
            )
    parts.append(f'<text x="4" y="18" font-size="10">{peak:,}</text>')
    parts.append(f'<line x1="48" y1="{_H + 10}" x2="{width}" y2="{_H + 10}" stroke="#999"/>')
    parts.append("</svg>")
    return "".join(parts)


def render(report: AuditReport) -> str:
    by_topic: dict[str, list[WindowReport]] = defaultdict(list)
    for h in report.hours:
        by_topic[h.topic].extend(h.windows)
    rows = "".join(
        f'<tr class="{"ok" if h.complete else "bad"}"><td>{html.escape(h.topic)}</td><td>{h.dt if h.hr is None else f"{h.dt} {h.hr}:00"}</td>'
        f"<td>{h.produced:,}</td><td>{h.loaded:,}</td><td>{h.quarantined:,}</td>"
        f"<td>{h.completeness:.2%}</td><td>{'complete' if h.complete else 'incomplete'}</td>"
        f"<td>{h.late:,}</td><td>{h.revision}</td>"
        f"<td>{html.escape('; '.join(h.reasons))}</td></tr>"
        for h in report.hours
    )
    charts = "".join(
        f"<h2>{html.escape(topic)}</h2>{_chart(topic, sorted(ws, key=lambda w: w.window_start_ms))}"
        for topic, ws in sorted(by_topic.items())
    )
    gaps = "".join(
        f"<p class=bad>gap: {html.escape(t)} lost {n:,} offsets to retention</p>"
        for t, n in sorted(report.gaps.items())
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Audit of run {html.escape(str(report.run_id))}</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}} td:first-child{{text-align:left}}
tr.ok td:nth-child(7){{color:#2a7a2a}} tr.bad td:nth-child(7),.bad{{color:#b22}}
.legend span{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px}}</style></head>
<body><h1>Audit of run {html.escape(str(report.run_id))}</h1>
<p>Producer counts (monitoring events, tier producer) against what the load committed, by the
records' Kafka timestamps; threshold {report.threshold:g}.</p>
<table><tr><th>topic</th><th>hour or day (UTC)</th><th>produced</th><th>loaded</th><th>quarantined</th>
<th>completeness</th><th>status</th><th>late</th><th>revision</th><th>notes</th></tr>{rows}</table>{gaps}
<p class="legend"><span style="background:#4a78b5"></span>produced<span style="background:#59a14f"></span>loaded
<span style="background:#e15759"></span>quarantined</p>{charts}
</body></html>
"""
