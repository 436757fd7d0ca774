"""A follower copies its leader's batches as stored: its own topic config (compression.type,
the CreateTime window) never rebuilds or refuses them (docs/contracts/log.md, "Append
validation": only the leader applies the append rules)."""

from __future__ import annotations

from broker.log.config import LogConfig
from broker.log.log import Log
from broker.records.batch import build_batch
from broker.records.header import CODEC_LZ4, parse_header
from broker.server.partition import Leadership, Partition


def test_a_follower_stores_the_leaders_batch_byte_for_byte(tmp_path):
    config = LogConfig(compression_type="gzip", timestamp_before_max_ms=0)
    log = Log.open(tmp_path / "t-0", "t", 0, config)
    try:
        follower = Partition(log, broker_id=1)
        follower.make_follower(Leadership(0, 1, (0, 1), (0, 1)))
        # As the leader stored it: lz4, offsets assigned, an old CreateTime.
        batch = build_batch([(None, b"v%d" % i, 1_000, []) for i in range(3)], codec=CODEC_LZ4,
                            base_offset=0, partition_leader_epoch=1)  # fmt: skip
        assert follower.append_as_follower(batch, now_ms=10**13) == len(batch)
        (region,) = log.read(0, 1 << 20).regions
        stored = region.read()
        assert stored == batch and parse_header(stored).codec == CODEC_LZ4
    finally:
        log.close()
