"""Where ACLs are kept, and how the authorizer's cache follows them.

A single broker keeps them in `acls.json` in its first log dir; a cluster in ZooKeeper as
Kafka 2.x's AclAuthorizer does (paths and JSON: broker/zk/layout.py and
acl.py): each resource pattern's ACLs in one znode, changed by a conditional update
(re-read and retried when another broker wrote first), then a change notification so
every broker's cache re-reads that pattern. At start every ACL is read.

Creating and deleting are the same for both stores: `_update(pattern, change)` is the one
read-modify-write of one pattern's ACLs each store provides.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Coroutine
from pathlib import Path

from broker.security.acl import (
    RESOURCE_TYPE_NAMES,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    PatternType,
    ResourcePattern,
    decode_entries,
    encode_entries,
    pattern_type_of,
    resource_type_of,
    validate_binding,
)
from broker.security.authorizer import Authorizer
from broker.util.files import write_atomically
from broker.zk import layout as z
from broker.zk.client import BadVersionError, NodeExistsError, NoNodeError, ZkClient
from broker.zk.notifications import ChangeNotificationListener

log = logging.getLogger(__name__)

ACLS_FILE = "acls.json"
STORED_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
# Conditional updates lost to other writers before a change gives up.
MAX_UPDATE_ATTEMPTS = 10

Entries = frozenset[AccessControlEntry]


class AclStore:
    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    async def start(self) -> None:
        raise NotImplementedError

    async def _update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> Entries:
        """Apply `change` to the stored ACLs of `pattern`; returns what was there before.
        The cache holds the new ACLs when it returns."""
        raise NotImplementedError

    async def create(self, bindings: list[AclBinding]) -> list[Exception | None]:
        """Create each binding (already there: fine); per binding, None or why not
        (AclError: the request's fault)."""
        results: list[Exception | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = defaultdict(list)
        for i, binding in enumerate(bindings):
            try:
                validate_binding(binding)
                by_pattern[binding.pattern].append(i)
            except AclError as exc:
                results[i] = exc
        for pattern, indexes in by_pattern.items():
            added = {bindings[i].entry for i in indexes}
            try:
                await self._update(pattern, lambda entries, added=added: entries | added)
            except Exception as exc:
                log.warning("could not create ACLs of %s", pattern, exc_info=True)
                for i in indexes:
                    results[i] = exc
        return results

    async def delete(
        self, filters: list[AclBindingFilter]
    ) -> list[tuple[list[AclBinding], Exception | None]]:
        """Per filter: the ACLs it deleted, and None or why it failed."""
        results = []
        for f in filters:
            try:
                f.validate()
                deleted = []
                patterns = {b.pattern for b in self.authorizer.bindings(f)}
                for pattern in sorted(patterns, key=str):
                    before = await self._update(
                        pattern,
                        lambda entries, f=f: frozenset(
                            e for e in entries if not f.matches_entry(e)
                        ),
                    )
                    deleted += [AclBinding(pattern, e) for e in before if f.matches_entry(e)]
                results.append((deleted, None))
            except Exception as exc:
                if not isinstance(exc, AclError):
                    log.warning("could not delete ACLs matching %s", f, exc_info=True)
                results.append(([], exc))
        return results


class FileAclStore(AclStore):
    """A single broker's ACLs: one JSON file, rewritten atomically on every change."""

    def __init__(self, authorizer: Authorizer, log_dir: Path) -> None:
        super().__init__(authorizer)
        self.path = log_dir / ACLS_FILE

    async def start(self) -> None:
        self.load()

    def load(self) -> None:
        """Read the file into the cache (no file: no ACLs); a broken file stops the start,
        naming it, rather than run with ACLs missing."""
        self.authorizer.clear()
        try:
            document = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except ValueError as exc:
            raise AclError(f"{self.path}: not JSON ({exc})") from None
        try:
            for resource in document["resources"]:
                pattern = ResourcePattern(
                    resource_type_of(resource["resourceType"]),
                    resource["name"],
                    pattern_type_of(resource["patternType"]),
                )
                entries = decode_entries(json.dumps(resource).encode())
                self.authorizer.set_entries(pattern, entries)
        except (KeyError, TypeError, AclError) as exc:
            raise AclError(f"{self.path}: not an ACL file ({exc})") from None

    async def _update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> Entries:
        before = self.authorizer.entries(pattern)
        after = change(before)
        if after != before:
            self.authorizer.set_entries(pattern, after)
            try:
                self._write()
            except Exception:
                self.authorizer.set_entries(pattern, before)
                raise
        return before

    def _write(self) -> None:
        resources: dict[ResourcePattern, list] = defaultdict(list)
        for binding in self.authorizer.bindings():
            resources[binding.pattern].append(binding.entry)
        document = {
            "version": 1,
            "resources": [
                {
                    "resourceType": RESOURCE_TYPE_NAMES[p.resource_type],
                    "name": p.name,
                    "patternType": p.pattern_type.name,
                    "acls": json.loads(encode_entries(entries))["acls"],
                }
                for p, entries in resources.items()
            ],
        }
        write_atomically(self.path, json.dumps(document, indent=1).encode())


class ZkAclStore(AclStore):
    """A cluster's ACLs in ZooKeeper, followed through both of Kafka's change paths."""

    def __init__(
        self,
        authorizer: Authorizer,
        zk: ZkClient,
        spawn: Callable[[Coroutine], object],
        now_ms: Callable[[], int],
    ) -> None:
        super().__init__(authorizer)
        self.zk = zk
        self.listeners = [
            AclChangeListener(self, z.ACL_LITERAL_CHANGES, spawn, now_ms),
            AclChangeListener(self, z.ACL_EXTENDED_CHANGES, spawn, now_ms),
        ]

    async def start(self) -> None:
        await self.zk.ensure_paths(
            [z.acl_root(t) for t in STORED_PATTERN_TYPES]
            + [z.acl_changes_path(t) for t in STORED_PATTERN_TYPES]
        )
        for listener in self.listeners:
            await listener.start()

    async def read_all(self, pattern_type: PatternType) -> None:
        """Every stored ACL of a pattern type into the cache (what is gone, goes)."""
        root = z.acl_root(pattern_type)
        seen = set()
        for kind in await self.zk.get_children(root) or []:
            try:
                resource_type = resource_type_of(kind)
            except AclError:
                log.error("ignoring ACLs under %s/%s: unknown resource type", root, kind)
                continue
            for name in await self.zk.get_children(f"{root}/{kind}") or []:
                pattern = ResourcePattern(resource_type, name, pattern_type)
                seen.add(pattern)
                try:
                    await self.reload(pattern)
                except z.ZkDataError as exc:
                    log.error("ignoring ACLs: %s", exc)
        for binding in self.authorizer.bindings(AclBindingFilter(pattern_type=pattern_type)):
            if binding.pattern not in seen:
                self.authorizer.set_entries(binding.pattern, ())

    async def reload(self, pattern: ResourcePattern) -> None:
        self.authorizer.set_entries(pattern, (await self._read(pattern))[0])

    async def _read(self, pattern: ResourcePattern) -> tuple[Entries, int | None]:
        found = await self.zk.get(z.acl_path(pattern))
        if found is None:
            return frozenset(), None
        try:
            return decode_entries(found[0]), found[1].version
        except AclError as exc:  # hand-written: not the fault of a request that reads it
            raise z.ZkDataError(f"{z.acl_path(pattern)}: {exc}") from None

    async def _update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> Entries:
        path = z.acl_path(pattern)
        for _ in range(MAX_UPDATE_ATTEMPTS):
            before, version = await self._read(pattern)
            after = change(before)
            if after == before:
                self.authorizer.set_entries(pattern, after)
                return before
            try:
                if version is None:
                    await self.zk.create(path, encode_entries(after), makepath=True)
                elif after:
                    await self.zk.set(path, encode_entries(after), version)
                else:
                    await self.zk.delete(path, version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker wrote first: read again
            self.authorizer.set_entries(pattern, after)
            await self.zk.create(
                f"{z.acl_changes_path(pattern.pattern_type)}/{z.ACL_CHANGE_PREFIX}",
                z.encode_acl_change(pattern),
                sequence=True,
                makepath=True,
            )
            return before
        raise RuntimeError(
            f"{path}: {MAX_UPDATE_ATTEMPTS} conditional updates lost to other writers"
        )


class AclChangeListener(ChangeNotificationListener):
    """One of Kafka's two ACL change paths: literal patterns' or extended ones'."""

    def __init__(
        self,
        store: ZkAclStore,
        path: str,
        spawn: Callable[[Coroutine], object],
        now_ms: Callable[[], int],
    ) -> None:
        super().__init__(store.zk, path, z.ACL_CHANGE_PREFIX, spawn, now_ms)
        self.store = store

    async def read_all(self) -> None:
        literal = self.path == z.ACL_LITERAL_CHANGES
        for pattern_type in STORED_PATTERN_TYPES:
            if (pattern_type == PatternType.LITERAL) == literal:
                await self.store.read_all(pattern_type)

    async def apply(self, name: str, data: bytes) -> None:
        await self.store.reload(z.decode_acl_change(self.path, data))
