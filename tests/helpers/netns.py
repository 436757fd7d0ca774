"""Hosts of one machine in Linux network namespaces, for network-partition tests.

A `TestNetwork` is a bridge on the machine with the address `<prefix>.<n>.1` (`machine`:
servers that run on the machine itself, ZooKeeper for instance, listen there) and one
namespace per host, cabled to the bridge by a veth pair, with `<prefix>.<n>.<2..>` on its
`eth0` and its loopback up. `add_host` returns a `broker.processes.Host` (address and the
`ip netns exec` prefix), which `BrokerProcess`, `ZooKeeperProcess` and `Cluster` accept;
`run` starts any command there. All traffic stays on the machine.

Partitions are silent, as in a real one: packets are dropped and nothing tells the
endpoints (no carrier change, no reset, no ICMP), so only timeouts notice: ZooKeeper
sessions, replica fetches, client requests. There is no iptables or nft command here and
the kernel has no tc drop action, so a drop is an HTB class whose queue (pfifo, limit 0)
takes no packet, selected by u32 filters on both ends of a host's cable (egress in the
namespace: what the host sends; egress of the machine's end: what it receives):
- `cut(host)` / `heal(host)`: all of the host's IP traffic, with everyone (the machine too);
- `cut_between(a, b)` / `heal_between(a, b)`: only between two hosts (either may be
  `machine`), both directions; `partition(side, other_side)` cuts every pair across two
  groups. Filters rather than one veth per pair keep one address per host, which is what
  brokers register and clients dial;
- `cut_one_way(a, b)` / `heal_one_way(a, b)`: only what `a` sends to `b` (b's packets
  still reach a), on the sender's end of its cable (or, for `machine` as the sender, on
  the machine's end of b's); `partition_one_way(senders, receivers)` for groups. A TCP
  connection across it stalls both ways (its ACKs are lost), but each side can still
  send new packets where the cut lets them through;
- `heal_all()`: every cut.
ARP still passes, so healing needs no re-learning.

Every name starts with `kht<owner pid, base 36>-<n>`: `close()` (also on `with` exit, and
it kills what still runs in the namespaces) removes every namespace and link the network
made, and `remove_stale()` (run by each new network) removes those of owners that are gone:
a run that was killed. Root and iproute2 are needed: `netns_unavailable()` says why not.
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from typing import Self

from broker.processes import Host

NAME_PREFIX = "kht"
DEFAULT_SUBNET_PREFIX = "10.213"
_NS_DEVICE = "eth0"
_DROP_CLASS = "1:2"
_networks = itertools.count()


class NetworkError(RuntimeError):
    """An `ip`/`tc` command failed (the message has the command and what it said)."""


@dataclass(frozen=True)
class NamespaceHost(Host):
    """A host of a `TestNetwork`: its namespace and the machine's end of its cable."""

    name: str = ""
    namespace: str = ""
    veth: str = ""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise NetworkError(f"`{' '.join(argv)}` failed: {done.stderr.strip() or done.stdout}")
    return done


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


@functools.cache
def netns_unavailable() -> str | None:
    """Why network namespaces cannot be used here (a skip reason), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (the tests run as root in CI)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"no `{tool}` command (iproute2) on this machine"
    probe = f"{NAME_PREFIX}{_base36(os.getpid())}-probe"
    try:
        _run("ip", "netns", "add", probe)
        _run("ip", "netns", "delete", probe)
    except NetworkError as exc:
        return f"cannot create a network namespace: {exc}"
    return None


def _owner_pid(name: str) -> int | None:
    match = re.fullmatch(rf"{NAME_PREFIX}([0-9a-z]+)-.*", name)
    return int(match.group(1), 36) if match else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    listed = _run("ip", "netns", "list").stdout.splitlines()
    return [line.split()[0] for line in listed if line.strip()]


def _links() -> list[str]:
    # "7: name@if6: <...>" -> name
    listed = _run("ip", "-o", "link", "show").stdout.splitlines()
    return [line.split(":")[1].strip().split("@")[0] for line in listed]


def _delete_namespace(namespace: str) -> None:
    """Kill what runs in it (the namespace and its veth end live on until the last process
    in it exits), then delete it."""
    pids = _run("ip", "netns", "pids", namespace, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    _run("ip", "netns", "delete", namespace)


def remove_stale(prefix: str = NAME_PREFIX) -> list[str]:
    """Remove the namespaces and links of networks whose owning process is gone (leftovers
    of a killed run); those of running owners (another test run) stay. What was removed."""
    removed = []
    for namespace in _namespaces():
        pid = _owner_pid(namespace) if namespace.startswith(prefix) else None
        if pid is not None and not _alive(pid):
            _delete_namespace(namespace)
            removed.append(namespace)
    for link in _links():
        pid = _owner_pid(link) if link.startswith(prefix) else None
        if pid is not None and not _alive(pid):
            _run("ip", "link", "delete", link, check=False)  # may have gone with its peer
            removed.append(link)
    return removed


class TestNetwork:
    """A bridge and namespaced hosts (see the module's docstring). `subnet_prefix` is the
    first two octets; the third is one no address of the machine uses yet."""

    __test__ = False  # a helper, not a pytest class

    def __init__(self, subnet_prefix: str = DEFAULT_SUBNET_PREFIX) -> None:
        self.subnet_prefix = subnet_prefix
        self.tag = f"{NAME_PREFIX}{_base36(os.getpid())}-{next(_networks)}"
        self.bridge = f"{self.tag}br"
        self.hosts: dict[str, NamespaceHost] = {}
        self.machine: Host | None = None
        self._subnet: str | None = None
        self._cut: set[str] = set()
        self._cut_peers: dict[str, set[str]] = {}
        # Per host: (u32 field, peer address) of the one-way cuts its cable carries.
        self._one_way: dict[str, set[tuple[str, str]]] = {}
        self._shaped: set[str] = set()

    # -- set-up and tear-down --------------------------------------------------------------

    def start(self) -> Self:
        if len(self.bridge) > 15:
            raise NetworkError(f"interface name {self.bridge!r} is longer than Linux allows")
        remove_stale()
        self._subnet = self._free_subnet()
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self._subnet}.1/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise
        self.machine = Host(f"{self._subnet}.1")
        return self

    def _free_subnet(self) -> str:
        listed = _run("ip", "-o", "-4", "addr", "show").stdout
        used = {ipaddress.ip_interface(m).network for m in re.findall(r"inet (\S+)", listed)}
        # Start from the pid, so concurrent runs seldom race for the same /24.
        for k in range(256):
            third = (os.getpid() + k) % 254 + 1
            candidate = ipaddress.ip_network(f"{self.subnet_prefix}.{third}.0/24")
            if not any(candidate.overlaps(net) for net in used):
                return f"{self.subnet_prefix}.{third}"
        raise NetworkError(f"no free /24 in {self.subnet_prefix}.0.0/16")

    def close(self) -> None:
        """Remove every namespace (killing what still runs there), veth and the bridge this
        network made; raise if any is left."""
        for host in self.hosts.values():
            if host.namespace in _namespaces():
                _delete_namespace(host.namespace)
        links = _links()
        for host in self.hosts.values():
            if host.veth in links:
                _run("ip", "link", "delete", host.veth, check=False)
        if self.bridge in links:
            _run("ip", "link", "delete", self.bridge, check=False)
        left = [n for n in _namespaces() + _links() if n.startswith(self.tag)]
        if left:
            raise NetworkError(f"could not remove {left}")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- hosts -------------------------------------------------------------------------------

    def add_host(self, name: str) -> NamespaceHost:
        """A namespace cabled to the bridge, with the next address of the subnet."""
        if self.machine is None:
            raise NetworkError("start the network first")
        if name in self.hosts:
            raise NetworkError(f"host {name!r} exists already")
        index = len(self.hosts)
        if index > 250:
            raise NetworkError("a /24 holds no more hosts")
        namespace = f"{self.tag}-{re.sub(r'[^A-Za-z0-9_.-]', '-', name)}"
        host = NamespaceHost(
            address=f"{self._subnet}.{index + 2}",
            command_prefix=("ip", "netns", "exec", namespace),
            name=name,
            namespace=namespace,
            veth=f"{self.tag}v{index}",
        )
        self.hosts[name] = host  # before creating anything, so close() removes it all
        peer = f"{self.tag}p{index}"
        _run("ip", "netns", "add", namespace)
        _run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", peer, "netns", namespace)
        _run("ip", "-n", namespace, "link", "set", peer, "name", _NS_DEVICE)
        _run("ip", "-n", namespace, "addr", "add", f"{host.address}/24", "dev", _NS_DEVICE)
        _run("ip", "-n", namespace, "link", "set", _NS_DEVICE, "up")
        _run("ip", "-n", namespace, "link", "set", "lo", "up")
        _run("ip", "link", "set", host.veth, "master", self.bridge)
        _run("ip", "link", "set", host.veth, "up")
        return host

    def run(self, host: Host, argv: list[str], **popen: object) -> subprocess.Popen:
        """Start `argv` on `host` (in its namespace; on the machine for `machine`)."""
        return subprocess.Popen([*host.command_prefix, *argv], **popen)

    # -- partitions ----------------------------------------------------------------------------

    def cut(self, host: NamespaceHost) -> None:
        """Drop all of the host's traffic, both ways, with every other host and the machine."""
        self._cut.add(self._known(host).name)
        self._apply(host)

    def heal(self, host: NamespaceHost) -> None:
        """Undo `cut(host)` (cuts between pairs stay)."""
        self._cut.discard(self._known(host).name)
        self._apply(host)

    def cut_between(self, a: Host, b: Host) -> None:
        """Drop the traffic between two hosts, both ways; either may be `machine`."""
        owner, peer = self._pair(a, b)
        self._cut_peers.setdefault(owner.name, set()).add(peer.address)
        self._apply(owner)

    def heal_between(self, a: Host, b: Host) -> None:
        owner, peer = self._pair(a, b)
        self._cut_peers.get(owner.name, set()).discard(peer.address)
        self._apply(owner)

    def partition(self, side: list[Host], other_side: list[Host]) -> None:
        """Cut every host of `side` from every host of `other_side` (hosts in neither, and
        hosts on the same side, still reach everyone): e.g. a leader from ZooKeeper and its
        followers, while clients on the machine still reach it."""
        for a in side:
            for b in other_side:
                self.cut_between(a, b)

    def heal_partition(self, side: list[Host], other_side: list[Host]) -> None:
        for a in side:
            for b in other_side:
                self.heal_between(a, b)

    def cut_one_way(self, a: Host, b: Host) -> None:
        """Drop what `a` sends to `b`; what `b` sends to `a` still passes."""
        owner, field, peer = self._sender_end(a, b)
        self._one_way.setdefault(owner.name, set()).add((field, peer.address))
        self._apply(owner)

    def heal_one_way(self, a: Host, b: Host) -> None:
        owner, field, peer = self._sender_end(a, b)
        self._one_way.get(owner.name, set()).discard((field, peer.address))
        self._apply(owner)

    def partition_one_way(self, senders: list[Host], receivers: list[Host]) -> None:
        """Nothing any of `senders` sends reaches any of `receivers` (the reverse passes)."""
        for a in senders:
            for b in receivers:
                self.cut_one_way(a, b)

    def heal_partition_one_way(self, senders: list[Host], receivers: list[Host]) -> None:
        for a in senders:
            for b in receivers:
                self.heal_one_way(a, b)

    def _sender_end(self, a: Host, b: Host) -> tuple[NamespaceHost, str, Host]:
        """(whose cable carries the cut, the u32 field naming the peer, the peer): the
        sender's namespace end (`dst` = b) unless the sender is `machine`, then the
        machine's end of b's cable (`src` = machine), see `_ends`."""
        if a == b:
            raise NetworkError(f"a host cannot be cut from itself ({a.address})")
        if a == self.machine:
            return self._known(b), "src", a
        return self._known(a), "dst", b

    def heal_all(self) -> None:
        self._cut.clear()
        self._cut_peers.clear()
        self._one_way.clear()
        for host in self.hosts.values():
            if host.name in self._shaped:
                self._apply(host)

    def _known(self, host: Host) -> NamespaceHost:
        if not isinstance(host, NamespaceHost) or self.hosts.get(host.name) != host:
            raise NetworkError(f"{host} is not a namespaced host of this network")
        return host

    def _pair(self, a: Host, b: Host) -> tuple[NamespaceHost, Host]:
        """(the host whose cable carries the pair's filters, the other): a namespaced host,
        the one added first, so that (a, b) and (b, a) are the same cut."""
        if a == b:
            raise NetworkError(f"a host cannot be cut from itself ({a.address})")
        if b != self.machine and (a == self.machine or self._index(b) < self._index(a)):
            a, b = b, a
        return self._known(a), b

    def _index(self, host: Host) -> int:
        return list(self.hosts.values()).index(self._known(host))

    def _ends(self, host: NamespaceHost) -> list[tuple[list[str], str, str]]:
        """Both ends of the host's cable: (tc and its namespace option, the device, the u32
        field naming the peer there). The namespace's end sends what the host sends (to
        `dst`); the machine's end sends what the host receives (from `src`)."""
        return [
            (["tc", "-n", host.namespace], _NS_DEVICE, "dst"),
            (["tc"], host.veth, "src"),
        ]

    def _apply(self, host: NamespaceHost) -> None:
        """Rewrite the drop filters on both ends of the host's cable from the wanted cuts."""
        if host.name not in self._shaped:
            self._shape(host)
        peers = sorted(self._cut_peers.get(host.name, ()))
        for tc, device, field in self._ends(host):
            filters = [*tc, "filter", "add", "dev", device, "parent", "1:", "protocol", "ip"]
            _run(*tc, "filter", "delete", "dev", device, "parent", "1:", check=False)
            if host.name in self._cut:
                _run(*filters, "pref", "1", "u32", "match", "u32", "0", "0", "flowid", _DROP_CLASS)
            one_way = sorted(p for f, p in self._one_way.get(host.name, ()) if f == field)
            for pref, peer in enumerate([*peers, *one_way], start=10):
                _run(*filters, "pref", str(pref), "u32", "match", "ip", field, f"{peer}/32",
                     "flowid", _DROP_CLASS)  # fmt: skip

    def _shape(self, host: NamespaceHost) -> None:
        """On both ends of the cable: an HTB root whose default class passes everything, and a
        class whose queue takes no packet (the drop)."""
        for tc, device, _ in self._ends(host):
            _run(*tc, "qdisc", "add", "dev", device, "root", "handle", "1:", "htb", "default", "1")
            for classid in ("1:1", _DROP_CLASS):
                _run(*tc, "class", "add", "dev", device, "parent", "1:", "classid", classid,
                     "htb", "rate", "100gbit", "quantum", "200000")  # fmt: skip
            _run(*tc, "qdisc", "add", "dev", device, "parent", _DROP_CLASS, "pfifo", "limit", "0")
        self._shaped.add(host.name)
