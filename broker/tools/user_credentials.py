"""kafka-configs for `--entity-type users`: SCRAM credentials, as Kafka's tool handles them.

    ... --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'
    ... --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    ... --describe --entity-type users [--entity-name alice]

With --bootstrap-server the brokers do it (AlterUserScramCredentials,
DescribeUserScramCredentials). Before any broker runs (the first credentials, e.g. the
inter-broker user or an administrator): with --zookeeper (a cluster's
`zookeeper.connect`, Kafka 2.x's way) the tool writes `/config/users/<user>` and a change
notification itself, so running brokers follow too; with --credentials-file (a single
broker's `sasl.scram.credentials.file`) it writes that file, which the broker re-reads
when it changes. Both check as a broker would (broker/security/user_scram.py).
Describing shows mechanisms and iterations, never a salt, key or password.
"""

from __future__ import annotations

import asyncio

from broker.client.admin import (
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
    scram_alteration_request,
)
from broker.security.credentials import Credentials
from broker.security.scram import MECHANISMS, MECHANISMS_BY_CODE
from broker.security.user_scram import (
    describe,
    plan_alterations,
    scram_entries,
    stored_configs,
)
from broker.tools.admin_command import CommandError
from broker.tools.output import Output
from broker.zk.client import ZkClient
from broker.zk.config_entities import read_user_configs, user_entity, write_entity_config

Change = UserScramCredentialUpsertion | UserScramCredentialDeletion


def scram_changes(user: str, added: dict[str, str], deleted: list[str]) -> list[Change]:
    """--add-config `MECH=[iterations=N,password=P]` and --delete-config `MECH` as
    alterations; anything else is refused naming the key (Kafka's tool knows only the
    SCRAM keys of users here: quotas are not served)."""
    changes: list[Change] = []
    for mechanism, value in added.items():
        _check_mechanism(mechanism)
        fields = {}
        for item in value.split(","):
            key, sep, val = item.partition("=")
            if not sep or key.strip() not in ("iterations", "password"):
                raise CommandError(
                    f"Invalid {mechanism} value {value!r}: expected "
                    "[iterations=N,password=P] (iterations optional)"
                )
            fields[key.strip()] = val
        if "password" not in fields:
            raise CommandError(f"{mechanism}: a password is needed")
        try:
            iterations = int(fields.get("iterations", MECHANISMS[mechanism].min_iterations))
        except ValueError:
            raise CommandError(f"{mechanism}: iterations must be a number") from None
        changes.append(
            UserScramCredentialUpsertion(user, mechanism, fields["password"], iterations)
        )
    for mechanism in deleted:
        _check_mechanism(mechanism)
        changes.append(UserScramCredentialDeletion(user, mechanism))
    return changes


def _check_mechanism(name: str) -> None:
    if name not in MECHANISMS:
        raise CommandError(
            f"Invalid config {name!r} for users: only SCRAM credentials "
            f"({', '.join(MECHANISMS)}) are supported"
        )


def describe_line(user: str, infos: list[ScramCredentialInfo]) -> str:
    shown = ", ".join(f"{i.mechanism}=iterations={i.iterations}" for i in infos)
    return f"SCRAM credential configs for user-principal '{user}' are {shown}"


# -- through the brokers --


def alter(admin: AdminClient, user: str, changes: list[Change], out: Output) -> None:
    admin.alter_user_scram_credentials(changes)
    if admin.last_errors:
        ((code, message),) = admin.last_errors.values()
        raise CommandError(message or code.name)
    out.line(f"Completed updating config for user {user}.")


def show(admin: AdminClient, user: str | None, out: Output) -> None:
    for name, infos in admin.describe_user_scram_credentials(
        None if user is None else [user]
    ).items():
        out.line(describe_line(name, infos))


# -- through ZooKeeper (before any broker runs) --


def zk_alter(zk_connect: str, user: str, changes: list[Change], out: Output) -> None:
    """Kafka's checks (broker/security/user_scram.py), then the user's entity and a
    change notification, as a broker would write them."""

    async def run() -> None:
        zk = ZkClient(zk_connect)
        await zk.start()
        try:
            body = scram_alteration_request(changes)
            plan = plan_alterations(body, await read_user_configs(zk, [user]))
            if plan.refused:
                (refusal,) = plan.refused.values()
                raise CommandError(refusal.message)
            for name, config in plan.new_configs.items():
                await write_entity_config(zk, user_entity(name), config)
        finally:
            await zk.close()

    asyncio.run(run())
    out.line(f"Completed updating config for entity: user-principal '{user}'.")


def file_alter(path: str, user: str, changes: list[Change], out: Output) -> None:
    """Kafka's checks, then the user's entries in a single broker's credentials file."""
    credentials = Credentials(path)
    stored = stored_configs(credentials.users(), [user])
    plan = plan_alterations(scram_alteration_request(changes), stored)
    if plan.refused:
        (refusal,) = plan.refused.values()
        raise CommandError(refusal.message)
    for name, config in plan.new_configs.items():
        credentials.replace(name, scram_entries(config))
    out.line(f"Completed updating config for entity: user-principal '{user}'.")


def file_show(path: str, user: str | None, out: Output) -> None:
    stored = stored_configs(Credentials(path).users(), None if user is None else [user])
    _show_described(describe({"users": None if user is None else [{"name": user}]}, stored), out)


def zk_show(zk_connect: str, user: str | None, out: Output) -> None:
    async def run() -> dict:
        zk = ZkClient(zk_connect)
        await zk.start()
        try:
            stored = await read_user_configs(zk, None if user is None else [user])
        finally:
            await zk.close()
        return describe({"users": None if user is None else [{"name": user}]}, stored)

    _show_described(asyncio.run(run()), out)


def _show_described(response: dict, out: Output) -> None:
    """A DescribeUserScramCredentials answer as the tool's lines (a refusal raised)."""
    for result in response["results"]:
        if result["error_code"]:
            raise CommandError(result["error_message"])
        infos = [
            ScramCredentialInfo(MECHANISMS_BY_CODE[i["mechanism"]].name, i["iterations"])
            for i in result["credential_infos"]
        ]
        out.line(describe_line(result["user"], infos))
