"""The segmented, append-only log of each partition (see README.md)."""

from broker.log.checkpoint import read_checkpoint, write_checkpoint
from broker.log.config import LogConfig
from broker.log.log import AppendInfo, Log, LogDeleted, OffsetOutOfRange, ReadResult, RecordTooLarge
from broker.log.manager import LogManager

__all__ = [
    "AppendInfo",
    "Log",
    "LogConfig",
    "LogDeleted",
    "LogManager",
    "OffsetOutOfRange",
    "ReadResult",
    "RecordTooLarge",
    "read_checkpoint",
    "write_checkpoint",
]
