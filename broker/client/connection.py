"""One blocking TCP connection to a broker: version negotiation, requests, pipelining.

A connection is used by one thread at a time. Requests may be pipelined: `send()`
several, then `receive()` each; Kafka answers requests on a connection in order, so
responses are read in the order they were sent and kept until asked for. Correlation
ids, the requests in flight and the pairing of answers are the sans-I/O
`ClientConnection` (broker/protocol/client_connection.py), the SASL exchange
`SaslExchange` (broker/security/sasl_client.py); this module moves their bytes.

Frames are read with exact lengths into a reusable buffer (`recv_into`), because a
Fetch response of many megabytes is the raw-fetch hot path: no per-chunk bytes
objects and no concatenation, just one copy out of the kernel and one when the codec
slices the records out.
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
import time
from typing import NamedTuple

from broker.client.security import PLAINTEXT, SecurityConfig, TlsError
from broker.protocol.apis import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    API_BY_KEY,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    END_TXN,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
)
from broker.protocol.client_connection import (
    MAX_FRAME_BYTES,
    ClientConnection,
    InFlight,
    Response,
)
from broker.protocol.errors import (
    ErrorCode,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
    error_for,
)
from broker.security.sasl_client import SaslExchange

CLIENT_SOFTWARE_NAME = "kafka-hourly"
CLIENT_SOFTWARE_VERSION = "0.1"

# The versions this client can speak: the declared range, narrowed where the client's
# logic needs more (record batches v2 need Produce >= 3 and Fetch >= 4; Metadata v0
# spells "all topics" differently and brings nothing we need).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 8),
    FETCH: (4, 11),
    LIST_OFFSETS: (1, 5),
    METADATA: (1, 8),
    API_VERSIONS: (0, 3),
    CREATE_TOPICS: (2, 4),
    DELETE_TOPICS: (1, 3),
    # v3+ name the producer id and epoch, so an abort can bump the epoch (KIP-360); v4
    # answers PRODUCER_FENCED. AddPartitionsToTxn v4+ is the brokers' batched form.
    INIT_PRODUCER_ID: (0, 4),
    ADD_PARTITIONS_TO_TXN: (0, 3),
    # v5 bumps the epoch at every end (KIP-890 part 2), which this producer does not follow.
    END_TXN: (0, 3),
    # This producer adds its group's offsets partition itself (AddOffsetsToTxn): a
    # TxnOffsetCommit v5 is a version 2 producer's (KIP-890 part 2); v4 only adds
    # TRANSACTION_ABORTABLE.
    ADD_OFFSETS_TO_TXN: (0, 3),
    TXN_OFFSET_COMMIT: (0, 3),
    # The group consumer's requests, up to their last versions before the flexible
    # encoding (KIP-482). The newer ones add nothing the consumer needs (KIP-559's protocol
    # echo, KIP-800's reasons, OffsetFetch v8's several groups), and librdkafka's mock
    # cluster advertises JoinGroup v6, SyncGroup v4, LeaveGroup v4 and OffsetFetch v6 but
    # cannot read or answer them in Kafka's layout. The bodies the consumer builds already
    # carry the newer fields (FindCoordinator v4's key list, LeaveGroup v3's member list,
    # SyncGroup v5's protocol): up to OffsetCommit 8, OffsetFetch 7, FindCoordinator 4,
    # JoinGroup 7, Heartbeat 4, LeaveGroup 5 and SyncGroup 5, raising a bound is enough.
    OFFSET_COMMIT: (2, 7),
    OFFSET_FETCH: (1, 5),
    FIND_COORDINATOR: (0, 2),
    JOIN_GROUP: (0, 5),
    HEARTBEAT: (0, 3),
    LEAVE_GROUP: (0, 2),
    SYNC_GROUP: (0, 3),
    # Handshake v1 puts the tokens in SaslAuthenticate; v0's raw token frames are not spoken.
    SASL_HANDSHAKE: (1, 1),
}

# Re-authenticate when this share of the broker's session lifetime has passed (Kafka's
# clients pick 85-95%), so requests in flight meanwhile still finish inside the session.
REAUTHENTICATE_AT = 0.85

# A broker that cannot be reached or does not answer: the connection is gone, another
# broker (or a new connection) may do.
UNREACHABLE = (NetworkError, RequestTimedOutError)

_SIZE = struct.Struct(">i")


class _Origin(NamedTuple):
    """The token of a request in flight: what it is sent again with when refused."""

    correlation_id: int  # the one the caller holds (differs once re-sent lower)
    body: dict


_BUFFER_POOL = 3


def _advertised_api_versions_max(body: dict, asked: int) -> int:
    """The ApiVersions max version listed in an UNSUPPORTED_VERSION answer, else `asked`.

    An answer that does not list ApiVersions (or was not a v0 body, see
    client_connection.py) gives no hint.
    """
    for k in body["api_keys"]:
        if k["api_key"] == API_VERSIONS:
            return k["max_version"]
    return asked


def _rejects_version(body: dict) -> bool:
    """True when an answer says the broker does not speak the request's version.

    That is UNSUPPORTED_VERSION as the request's own error code or, for answers
    without one (Produce, ListOffsets, ...), as the error of every item in it.
    """
    if "error_code" in body:
        return body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    found = False
    stack = [v for v in body.values() if isinstance(v, list)]
    while stack:
        for item in stack.pop():
            if not isinstance(item, dict):
                continue
            if "error_code" in item:
                if item["error_code"] != ErrorCode.UNSUPPORTED_VERSION:
                    return False
                found = True
            else:
                stack.extend(v for v in item.values() if isinstance(v, list))
    return found


def _unexported(buf: bytearray) -> bool:
    """True when no memoryview of buf is alive: a bytearray refuses to resize then."""
    try:
        buf.append(0)
    except BufferError:
        return False
    buf.pop()
    return True


class BrokerConnection:
    """A blocking connection to one broker: TLS and SASL as `security` says, then
    negotiated with ApiVersions on connect."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str = "kafka-hourly",
        timeout_s: float = 30.0,
        security: SecurityConfig | None = None,
    ):
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security or PLAINTEXT
        # time.monotonic() by which to authenticate again (SASL session lifetime); 0: never.
        self._reauthenticate_at = 0.0
        self.versions: dict[int, tuple[int, int]] = {}
        # api_key -> a version this broker advertised, then refused: the ceiling is below it.
        self.refused: dict[int, int] = {}
        self._core = ClientConnection(f"{host}:{port}", client_id)
        self._done: dict[int, dict] = {}
        self._head = bytearray(4)
        self._buffers: list[bytearray] = []
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise NetworkError(f"cannot connect to {host}:{port}: {exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if self.security.uses_tls:
                self._sock = self._wrap_tls(self._sock)
            self.versions = self._negotiate()
            if self.security.uses_sasl:
                self._authenticate()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    @property
    def closed(self) -> bool:
        return self._sock is None

    # --- security -----------------------------------------------------------------

    def _wrap_tls(self, sock: socket.socket) -> ssl.SSLSocket:
        """TLS on the connected socket. A refused certificate is a setting to fix
        (TlsError, not retried); anything else on the way is a network failure."""
        context = self.security.ssl_context()
        try:
            return context.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise TlsError(
                f"TLS with {self.host}:{self.port}: {exc.verify_message or exc}"
            ) from None
        except OSError as exc:
            sock.close()
            raise NetworkError(f"TLS handshake with {self.host}:{self.port} failed: {exc}") from exc

    def _authenticate(self) -> None:
        """SaslHandshake v1 and SaslAuthenticate until the mechanism is done
        (SaslExchange); the broker's refusal is raised with its message."""
        if SASL_AUTHENTICATE not in self.versions:
            raise UnsupportedVersionError(
                f"{self.host}:{self.port} does not offer SaslAuthenticate: it does not "
                f"speak SASL on this listener"
            )
        security = self.security
        exchange = SaslExchange(
            security.sasl_mechanism, security.sasl_plain_username, security.sasl_plain_password
        )
        request = exchange.start()
        while request is not None:
            api_key, body = request
            request = exchange.receive(self.receive(self._send_frame(
                api_key, self.version_for(api_key), body, True
            )))  # fmt: skip
        lifetime_ms = exchange.session_lifetime_ms
        self._reauthenticate_at = (
            time.monotonic() + lifetime_ms * REAUTHENTICATE_AT / 1000 if lifetime_ms > 0 else 0.0
        )

    def _reauthenticate_if_due(self) -> None:
        """Authenticate again before the broker's session ends, on the same connection;
        answers still outstanding are read (and kept) first, as Kafka's clients do."""
        if not self._reauthenticate_at or time.monotonic() < self._reauthenticate_at:
            return
        while self._core:
            last = self._core.in_flight[-1].token.correlation_id
            self._done[last] = self.receive(last)
        try:
            self._authenticate()
        except BaseException:
            self.close()  # the broker closes a connection whose session it did not renew
            raise

    # --- versions -----------------------------------------------------------------

    def _negotiate(self) -> dict[int, tuple[int, int]]:
        """Ask ApiVersions at our highest version, lower on UNSUPPORTED_VERSION down to v0.

        A broker that does not speak the version asked answers UNSUPPORTED_VERSION, the
        error code right after the correlation id in every version. Kafka puts a v0 body
        around it listing the ApiVersions range it does speak; other implementations
        send what they like (librdkafka's mock cluster answers a v3 request with a body
        that decodes as no version). So the answer's ranges are only a hint for the
        next version to try, never taken as the broker's ranges: those come from a
        successful answer.
        """
        body = {
            "client_software_name": CLIENT_SOFTWARE_NAME,
            "client_software_version": CLIENT_SOFTWARE_VERSION,
        }
        lowest, version = CLIENT_VERSIONS[API_VERSIONS]
        while True:
            self._send_frame(API_VERSIONS, version, body, True)
            response = self._receive_frame().body
            error = response["error_code"]
            if error == ErrorCode.NONE:
                return {
                    k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]
                }
            if error != ErrorCode.UNSUPPORTED_VERSION:
                raise error_for(error, f"ApiVersions from {self.host}:{self.port}")
            if version == lowest:
                raise UnsupportedVersionError(
                    f"{self.host}:{self.port} refused ApiVersions v{lowest}-"
                    f"{CLIENT_VERSIONS[API_VERSIONS][1]}"
                )
            version = max(lowest, min(version - 1, _advertised_api_versions_max(response, version)))

    def version_for(self, api_key: int) -> int:
        """The highest version of `api_key` that both the broker and this client speak."""
        ours = CLIENT_VERSIONS.get(api_key)
        if ours is None:
            api = API_BY_KEY.get(api_key)
            if api is None:
                raise UnsupportedVersionError(f"this client does not speak api_key {api_key}")
            ours = (api.min_version, api.max_version)
        theirs = self.versions.get(api_key)
        name = API_BY_KEY[api_key].name if api_key in API_BY_KEY else str(api_key)
        if theirs is None:
            raise UnsupportedVersionError(f"{self.host}:{self.port} does not offer {name}")
        high = min(ours[1], theirs[1])
        if api_key in self.refused:
            high = min(high, self.refused[api_key] - 1)
        if high < max(ours[0], theirs[0]):
            refused = f" (it refused v{self.refused[api_key]})" if api_key in self.refused else ""
            raise UnsupportedVersionError(
                f"{name}: broker {self.host}:{self.port} speaks v{theirs[0]}-{theirs[1]}"
                f"{refused}, this client v{ours[0]}-{ours[1]}"
            )
        return high

    def _lower_version(self, pending: InFlight, body: dict) -> int | None:
        """The version to send `pending` again at, when `body` refuses its version.

        A broker may refuse a version it advertised (an answer of UNSUPPORTED_VERSION).
        A refusal of the version `version_for` picks lowers that API's ceiling on this
        connection by one, and the request goes again at the new ceiling; so do requests
        still in flight above it. A version below the ceiling was the caller's own
        choice: its answer stands. None: keep the answer as it is.
        """
        if not _rejects_version(body):
            return None
        api_key = pending.api_key
        try:
            ceiling = self.version_for(api_key)
            if pending.version < ceiling:
                return None
            if pending.version == ceiling:
                self.refused[api_key] = ceiling
                ceiling = self.version_for(api_key)
        except UnsupportedVersionError:
            return None  # nothing lower to try: the caller sees the refusal
        return ceiling

    # --- requests -----------------------------------------------------------------

    def request(self, api_key: int, body: dict, version: int | None = None) -> dict:
        """Send one request and wait for its response body."""
        return self.receive(self.send(api_key, body, version))

    def send(
        self, api_key: int, body: dict, version: int | None = None, expect_response: bool = True
    ) -> int:
        """Send a request without waiting; returns its correlation id for receive().

        With expect_response=False (Produce with acks=0) the broker sends nothing back,
        so nothing is queued for it.
        """
        self._reauthenticate_if_due()
        if version is None:
            version = self.version_for(api_key)
        return self._send_frame(api_key, version, body, expect_response)

    def receive(self, correlation_id: int, timeout_s: float | None = None) -> dict:
        """The response body of a request sent earlier on this connection.

        Responses of requests sent before it are read (and kept) on the way. An answer
        refusing the request's version sends the request again lower (see
        `_lower_version`); the caller's correlation id still finds its answer. A broken
        or timed-out connection is closed: the stream can no longer be trusted.
        """
        done = self._done.pop(correlation_id, None)
        if done is not None:
            return done
        if self._sock is None:
            raise NetworkError(f"connection to {self.host}:{self.port} is closed")
        if not any(r.token.correlation_id == correlation_id for r in self._core.in_flight):
            raise ValueError(f"no request with correlation id {correlation_id} is outstanding")
        if timeout_s is not None:
            self._settimeout(timeout_s)
        try:
            while True:
                pending, body = self._receive_frame()
                origin = pending.token
                lower = self._lower_version(pending, body)
                if lower is not None:
                    self._send_frame(pending.api_key, lower, origin.body, True, origin)
                    continue
                if origin.correlation_id == correlation_id:
                    return body
                self._done[origin.correlation_id] = body
        finally:
            if timeout_s is not None and self._sock is not None:
                self._settimeout(self.timeout_s)

    def ready(self, correlation_id: int, timeout_s: float) -> bool:
        """Whether receive(correlation_id) can go ahead without waiting for the broker to
        start answering, waiting up to `timeout_s` for it: the answer is kept already, or
        bytes (of it or of answers before it) are waiting, or the connection is closed
        (receive raises then). For answers a broker may hold long (a group's JoinGroup),
        so a caller can do other work meanwhile; receive() still reads the rest."""
        if correlation_id in self._done or self._sock is None:
            return True
        if isinstance(self._sock, ssl.SSLSocket) and self._sock.pending():
            return True  # decrypted bytes already read off the socket
        try:
            readable, _, _ = select.select([self._sock], [], [], max(0.0, timeout_s))
        except (OSError, ValueError):
            return True  # receive() reports the broken socket
        return bool(readable)

    def close(self) -> None:
        sock, self._sock = getattr(self, "_sock", None), None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass
        self._core.drain()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- bytes on the wire --------------------------------------------------------

    def _settimeout(self, timeout_s: float) -> None:
        assert self._sock is not None
        self._sock.settimeout(timeout_s)

    def _send_frame(
        self,
        api_key: int,
        version: int,
        body: dict,
        expect_response: bool,
        origin: _Origin | None = None,
    ) -> int:
        if self._sock is None:
            raise NetworkError(f"connection to {self.host}:{self.port} is closed")
        if origin is None:  # a first sending: the caller holds the id it gets now
            origin = _Origin(self._core.next_correlation_id, body)
        cid, frame = self._core.send_request(api_key, version, body, origin, expect_response)
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            self.close()
            raise NetworkError(f"send to {self.host}:{self.port} failed: {exc}") from exc
        return cid

    def _read_frame(self) -> memoryview:
        """The next response frame without its size prefix, as a view of the reused buffer.

        Views into it (records) stay valid: its buffer is not reused while they live.
        """
        self._read_exact(memoryview(self._head))
        (size,) = _SIZE.unpack(self._head)
        if not 4 <= size <= MAX_FRAME_BYTES:
            self.close()
            raise NetworkError(f"{self.host}:{self.port} sent a frame of size {size}")
        view = memoryview(self._buffer_for(size))[:size]
        self._read_exact(view)
        return view

    def _buffer_for(self, size: int) -> bytearray:
        """A buffer no caller still holds a view of. Decoded records are views into the
        frame (no copy), so a buffer is reused only once its views are gone; a few are
        pooled because a caller typically keeps the previous result while fetching the
        next. Reuse matters: a fresh multi-megabyte buffer costs a page fault per page."""
        for buf in self._buffers:
            if len(buf) >= size and _unexported(buf):
                return buf
        buf = bytearray(max(size, 64 * 1024))
        self._buffers.append(buf)
        if len(self._buffers) > _BUFFER_POOL:
            self._buffers.pop(0)
        return buf

    def _read_exact(self, view: memoryview) -> None:
        sock = self._sock
        if sock is None:
            raise NetworkError(f"connection to {self.host}:{self.port} is closed")
        recv_into = sock.recv_into
        got = 0
        want = len(view)
        try:
            while got < want:
                n = recv_into(view[got:])
                if n == 0:
                    raise NetworkError(f"{self.host}:{self.port} closed the connection")
                got += n
        except TimeoutError as exc:
            self.close()
            raise RequestTimedOutError(f"no response from {self.host}:{self.port} in time") from exc
        except OSError as exc:
            self.close()
            raise NetworkError(f"receive from {self.host}:{self.port} failed: {exc}") from exc
        except NetworkError:
            self.close()
            raise

    def _receive_frame(self) -> Response:
        """The next frame read and paired with its request; a frame that does not fit
        (client_connection.py) closes the connection: the stream can no longer be trusted."""
        frame = self._read_frame()
        try:
            return self._core.receive_frame(frame)
        except NetworkError:
            self.close()
            raise
