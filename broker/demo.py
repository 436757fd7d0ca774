"""The embedded demo: start a broker, produce a sample through our client, read it back
through the fetch API, stop cleanly. `./dev demo` runs it."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from pathlib import Path

from broker.client.admin import AdminClient, NewTopic
from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from broker.config.server import BrokerConfig
from broker.server.broker import Broker

ROOT = Path(__file__).resolve().parent.parent


class BrokerThread(threading.Thread):
    """A broker on its own event loop, so the blocking clients can run beside it."""

    def __init__(self, config: BrokerConfig) -> None:
        super().__init__(daemon=True, name="broker")
        self.broker = Broker(config)
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        await self.broker.start()
        self.ready.set()
        await self._stopping.wait()
        await self.broker.stop()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self._stopping.set)
        self.join(30)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="kafka-hourly-demo-"))
    config = BrokerConfig.from_mapping(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(work / "logs")}
    )
    thread = BrokerThread(config)
    thread.start()
    thread.ready.wait(30)
    bootstrap = f"127.0.0.1:{thread.broker.port}"
    print(f"broker listening on {bootstrap}, logs in {work / 'logs'}")
    try:
        admin = AdminClient(bootstrap)
        admin.create_topics([NewTopic("page-views", 3)])
        admin.close()
        started = time.monotonic()
        with Producer(bootstrap, compression="lz4", linger_ms=5) as producer:
            futures = [
                producer.send(
                    "page-views",
                    f'{{"page": "/p/{i % 50}", "n": {i}}}'.encode(),
                    key=f"user-{i % 100}".encode(),
                )
                for i in range(10_000)
            ]
            producer.flush()
        offsets = [f.result() for f in futures]
        print(f"produced {len(offsets)} records in {time.monotonic() - started:.2f}s")
        consumer = SimpleConsumer(bootstrap)
        total = 0
        for partition in consumer.partitions_for("page-views"):
            offset, end = (
                consumer.earliest_offset("page-views", partition),
                consumer.latest_offset("page-views", partition),
            )
            count = 0
            while offset < end:
                result = consumer.fetch("page-views", partition, offset)
                records = list(result.records())
                count += len(records)
                offset = result.next_offset
            print(f"  partition {partition}: offsets [0, {end}) read back, {count} records")
            total += count
        consumer.close()
        print(f"read back {total} records through the fetch API")
        assert total == len(offsets), "every produced record is read back"
    finally:
        thread.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("broker stopped cleanly")


if __name__ == "__main__":
    main()
