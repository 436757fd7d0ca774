"""`python -m ingest run|rerun|compact|history|audit|register --config conf/ingest.yaml [--set key=value ...]`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections import defaultdict
from datetime import UTC, datetime

from broker.config.definition import ConfigError
from broker.util.clock import SECOND_MS
from ingest.config import load_config, secrets_from_environment
from ingest.preflight import first_line


def _summary(manifest) -> str:
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    for p in manifest.partitions:
        r = rows[p.topic]
        r[0] += 1
        r[1] += p.next - p.first
        r[2] += p.loaded
        r[3] += p.quarantined
        r[4] += p.skipped
        r[5] += len(p.files)
    lines = [
        f"run {manifest.run_id} ({manifest.kind})",
        f"{'topic':<24} {'parts':>5} {'offsets':>10} {'loaded':>10} {'quarant.':>9} {'skipped':>8} {'files':>6}",
    ]
    total = [0] * 6
    for topic, r in sorted(rows.items()):
        lines.append(
            f"{topic:<24} {r[0]:>5} {r[1]:>10,} {r[2]:>10,} {r[3]:>9,} {r[4]:>8,} {r[5]:>6}"
        )
        total = [a + b for a, b in zip(total, r, strict=True)]
    lines.append(
        f"{'total':<24} {total[0]:>5} {total[1]:>10,} {total[2]:>10,} {total[3]:>9,} {total[4]:>8,} "
        f"{total[5]:>6}"
    )
    gaps = [p for p in manifest.partitions if p.gap]
    for p in gaps:
        lines.append(
            f"gap: {p.topic}[{p.partition}] offsets {p.gap.from_offset}..{p.gap.to_offset} were deleted "
            "by retention before they were loaded"
        )
    for p in manifest.partitions:
        if p.read_from and p.read_from != [p.leader]:
            lines.append(
                f"leader moved: {p.topic}[{p.partition}] planned on broker {p.leader}, read from "
                + ", ".join(str(b) for b in p.read_from)
            )
    lines.append("ledger balances" if manifest.ledger_balances() else "LEDGER DOES NOT BALANCE")
    return "\n".join(lines)


def _parse_range(text: str) -> tuple[str, int, int, int]:
    try:
        topic, partition, first, next_ = text.rsplit(":", 3)
        return topic, int(partition), int(first), int(next_)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected topic:partition:first:next") from None


def _parse_time(text: str) -> int:
    stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return int(stamp.timestamp() * SECOND_MS)


def _audit_and_finalize(config, fs, manifest, out, spark=None) -> int:
    from ingest import audit

    if config["audit.publish"]:
        audit.publish_loaded_counts(config, fs, manifest)
    report = audit.audit(config, fs, manifest.run_id)
    path = audit.write_report(fs, report)
    done = audit.finalize(fs, report)
    _publish_audit_metrics(config, fs, report, {p.topic for p in manifest.partitions})
    print(report.text(), file=out)
    print(
        f"audit report: {fs.uri(path)}; {len(done)} hour(s) complete (_SUCCESS written), "
        f"{len(report.incomplete_hours)} not yet",
        file=out,
    )
    _register(config, fs, out, spark, finalized=[h.marker for h in done])
    return len(report.incomplete_hours)


def _publish_audit_metrics(config, fs, report, topics) -> None:
    from ingest import metrics

    if report.run_id is None:
        return
    try:
        registry = metrics.audit_metrics(report, fs, topics)
        metrics.publish(config, fs, report.run_id, "audit", registry)
    except Exception:  # the verdict and the markers are written; metrics must not fail it
        logging.getLogger(__name__).exception("the audit's metrics were not published")


def _register(config, fs, out, spark=None, finalized=(), everything=False) -> bool:
    """Queue the finalized hours for their tables and register what is queued (or every
    finalized hour); False when some stay queued. The data is committed either way."""
    from ingest import warehouse
    from ingest.preflight import Unusable, check_metastore

    if config["warehouse.registrar"] == "none":
        return True
    warehouse.enqueue(config, fs, finalized)
    if not everything and not warehouse.pending(fs):
        return True
    try:
        # Before Spark asks the metastore: its client retries, then logs Java traces.
        check_metastore(config)
    except Unusable as exc:
        queued = warehouse.pending(fs)
        warehouse.mark_failed(fs, queued, str(exc))
        print(f"error: {exc}; {len(queued)} hour(s) stay queued for their tables", file=sys.stderr)
        return False
    session = spark or _session(config)
    try:
        if everything:
            result = warehouse.register_all(config, fs, session)
        else:
            result = warehouse.register_pending(config, fs, session)
    finally:
        if spark is None:
            session.stop()
    print(result.text(), file=out)
    return not result.failed


# run, rerun, audit: the data is committed (and audited), but some finalized hours are
# still queued for their tables (a metastore down, a table that cannot follow its files).
TABLES_BEHIND = 4


def _tables_behind(config) -> bool:
    from ingest import job, warehouse

    return config["warehouse.registrar"] != "none" and bool(
        warehouse.pending(job.open_root(config))
    )


def _session(config):
    """The job's Spark session, with the warehouse's catalog when tables are kept."""
    from ingest.spark_runner import spark_session
    from ingest.warehouse import spark_conf

    return spark_session(config["spark.master"], config["spark.app.name"], spark_conf(config))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ingest", description="The hourly load into Hadoop"
    )
    parser.add_argument("--config", default="conf/ingest.yaml", help="conf/ingest.yaml")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a key"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="load every selected partition up to its high watermark")
    run.add_argument("--no-audit", action="store_true", help="skip the audit after the commit")
    rerun = sub.add_parser("rerun", help="re-read stored runs and replace their files")
    what = rerun.add_mutually_exclusive_group(required=True)
    what.add_argument("--run", help="a stored run id")
    what.add_argument(
        "--range",
        action="append",
        type=_parse_range,
        metavar="TOPIC:PARTITION:FIRST:NEXT",
        help="rerun the stored runs overlapping these offsets (repeatable)",
    )
    what.add_argument(
        "--from", dest="time_from", type=_parse_time, help="event time (ISO 8601, UTC)"
    )
    rerun.add_argument("--to", dest="time_to", type=_parse_time, help="with --from")
    sub.add_parser("history", help="list the committed runs")
    sub.add_parser(
        "status",
        help="one screen: brokers, partitions, groups' lag, the registry, the last run, hours",
    )
    reg = sub.add_parser(
        "register", help="register the finalized hours still queued in their warehouse tables"
    )
    reg.add_argument(
        "--all", action="store_true", help="register every finalized hour (a new metastore)"
    )
    comp = sub.add_parser(
        "compact", help="merge the small files of finalized hours (compaction.target.file.bytes)"
    )
    comp.add_argument(
        "--topic",
        action="append",
        help="a topic to compact (repeatable; default: those compaction.topics matches)",
    )
    comp.add_argument("--from", dest="time_from", type=_parse_time, help="first hour (ISO, UTC)")
    comp.add_argument("--to", dest="time_to", type=_parse_time, help="end (exclusive; ISO, UTC)")
    comp.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    sub.add_parser("config-docs", help="print the reference of conf/ingest.yaml's keys (Markdown)")
    aud = sub.add_parser("audit", help="audit the live runs and write _SUCCESS for complete hours")
    aud.add_argument(
        "--fail-incomplete", action="store_true", help="exit 3 when an hour is incomplete"
    )
    args = parser.parse_args(argv)

    if args.command == "config-docs":
        from ingest.config import INGEST_CONFIG

        print(INGEST_CONFIG.to_markdown(), end="")
        return 0
    _log_to_terminal()
    try:
        config = load_config(args.config, args.set, secrets_from_environment())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log_file = _log_to_file(config["log.file"])
    from ingest.preflight import Unusable

    try:
        return _command(args, parser, config, sys.stdout)
    except Unusable as exc:
        logging.getLogger(__name__).info("%s: %s", args.command, exc, extra=LOG_ONLY)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (ConfigError, ValueError) as exc:  # a mistake in what was asked for
        logging.getLogger(__name__).exception("%s failed", args.command, extra=LOG_ONLY)
        print(f"error: {first_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        logging.getLogger(__name__).exception("%s failed", args.command, extra=LOG_ONLY)
        where = f" (traceback in {log_file})" if log_file else ""
        print(f"error: {type(exc).__name__}: {first_line(exc)}{where}", file=sys.stderr)
        return 1


# A record for the log file only: the terminal has its one line already.
LOG_ONLY = {"terminal": False}


class _NoTraceback(logging.Formatter):
    """The terminal gets one line per record; the traceback goes to the log file."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text
        record.exc_info = record.exc_text = None
        try:
            return super().format(record)
        finally:
            record.exc_info, record.exc_text = saved


def _log_to_terminal() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_NoTraceback("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(lambda record: getattr(record, "terminal", True))
    # A no-op where logging is configured already (a caller running main in process).
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def _log_to_file(path: str) -> str | None:
    if not path:
        return None
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        handler = logging.FileHandler(path)
    except OSError as exc:
        print(f"warning: cannot write the log {path} (log.file): {exc.strerror}", file=sys.stderr)
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    return path


def _command(args, parser, config, out) -> int:
    from ingest import job, preflight
    from ingest.commit import list_runs, load_manifest

    # What a command needs, checked before Spark starts: one line each when missing.
    if args.command in ("run", "rerun", "audit"):
        preflight.check_sources(config, select=args.command == "run")
    if args.command in ("run", "rerun", "audit", "register", "history", "compact"):
        reads_only = args.command == "history" or getattr(args, "dry_run", False)
        preflight.check_root(config, write=not reads_only)
    if args.command == "rerun" and args.run and args.run not in list_runs(job.open_root(config)):
        raise ValueError(f"no committed run {args.run} under {config['root']}")
    if args.command == "register" and config["warehouse.registrar"] != "none":
        preflight.check_registry(config)
        preflight.check_metastore(config)
    if args.command == "run":
        spark = _session(config)
        try:
            result = job.run_load(config, spark=spark)
            for run in result.recovered.rolled_forward:
                print(f"rolled forward the interrupted commit of {run}", file=out)
            print(_summary(result.manifest), file=out)
            if not args.no_audit:
                _audit_and_finalize(config, job.open_root(config), result.manifest, out, spark)
        finally:
            spark.stop()
        return TABLES_BEHIND if _tables_behind(config) else 0
    if args.command == "rerun":
        if args.time_from is not None and args.time_to is None:
            parser.error("--from needs --to")
        spark = _session(config)
        try:
            results = job.rerun(
                config,
                spark=spark,
                run_id=args.run,
                ranges=args.range,
                time_range=(args.time_from, args.time_to) if args.time_from is not None else None,
            )
            for r in results:
                print(f"{r.manifest.replaces} replaced by {r.run_id}", file=out)
                print(_summary(r.manifest), file=out)
            if results:
                _audit_and_finalize(config, job.open_root(config), results[-1].manifest, out, spark)
        finally:
            spark.stop()
        return TABLES_BEHIND if _tables_behind(config) else 0
    if args.command == "compact":
        from ingest import compact

        what = {"topics": args.topic, "start_ms": args.time_from, "end_ms": args.time_to}
        # The plan first, in process (it lists and reads footers): Spark only when there is
        # something to write (the DAG's task runs every hour).
        result = compact.compact(config, dry_run=True, **what)
        if result.plans and not args.dry_run:
            spark = _session(config)
            try:
                result = compact.compact(config, spark=spark, **what)
            finally:
                spark.stop()
        print(result.text(), file=out)
        return 0
    fs = job.open_root(config)
    if args.command == "status":
        from ingest import status

        sections = status.gather(config, fs)
        print(status.render(sections, status.colour_wanted(out)), file=out)
        return {status.OK: 0, status.WARN: 0, status.BAD: 1}[status.worst(sections)]
    if args.command == "history":
        print(
            f"{'run':<30} {'kind':<7} {'replaces':<30} {'parts':>5} {'loaded':>10} {'quarant.':>9} {'gaps':>5}",
            file=out,
        )
        for run in list_runs(fs):
            m = load_manifest(fs, run)
            print(
                f"{run:<30} {m.kind:<7} {m.replaces or '-':<30} {len(m.partitions):>5} "
                f"{sum(p.loaded for p in m.partitions):>10,} {sum(p.quarantined for p in m.partitions):>9,} "
                f"{sum(1 for p in m.partitions if p.gap):>5}",
                file=out,
            )
        return 0
    if args.command == "register":
        if config["warehouse.registrar"] == "none":
            print("warehouse.registrar is none: no tables to register", file=out)
            return 0
        return 0 if _register(config, fs, out, everything=args.all) else 1
    if args.command == "audit":
        runs = list_runs(fs)
        if not runs:
            print("nothing loaded yet", file=out)
            return 0
        incomplete = _audit_and_finalize(config, fs, load_manifest(fs, runs[-1]), out)
        if incomplete and args.fail_incomplete:
            return 3
        return TABLES_BEHIND if _tables_behind(config) else 0
    return 2
