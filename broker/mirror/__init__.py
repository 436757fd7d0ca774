"""MirrorMaker: topics copied from one Kafka-protocol cluster into another (README.md)."""

from broker.mirror.mirror_maker import MIRROR_CONFIG, MirrorMaker

__all__ = ["MIRROR_CONFIG", "MirrorMaker"]
