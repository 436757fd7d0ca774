"""The registry behind HTTPS and HTTP basic authentication, as a real process, used by
Confluent's own SchemaRegistryClient and by ours: who gets in, who may only read, what a
wrong password gets, and that no secret reaches the log."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import warnings

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from broker.processes import ROOT, RegistryProcess
from schemas.client import RegistryClient
from schemas.client import RegistryError as OurRegistryError
from schemas.registry.auth import AuthPolicy, Users, UsersFileError, parse_users, user_line
from schemas.registry.config import ConfigError, RegistryConfig
from tests.helpers.certs import TestCA

ADMIN_PASSWORD = "admin-s3cret-pw"
READER_PASSWORD = "reader-s3cret-pw"
SCHEMA = json.dumps(
    {"type": "record", "name": "Login", "fields": [{"name": "user", "type": "string"}]}
)


def _passwd(users_file, user, password, *roles):
    args = [sys.executable, "-m", "schemas.registry", "passwd", str(users_file), user]
    for role in roles:
        args += ["--role", role]
    return subprocess.run(
        args, input=password + "\n", capture_output=True, text=True, cwd=ROOT, check=False
    )


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    work = tmp_path_factory.mktemp("registry-secured")
    ca = TestCA(work / "ca")
    server = ca.issue("registry", hosts=["127.0.0.1", "localhost"], password="key-pw")
    users = work / "users"
    assert _passwd(users, "admin", ADMIN_PASSWORD, "admin").returncode == 0
    assert _passwd(users, "reader", READER_PASSWORD, "readonly").returncode == 0
    assert _passwd(users, "outsider", "outsider-pw", "guest").returncode == 0
    settings = {
        "kafkastore.type": "memory",
        "ssl.keystore.location": str(server.keystore),
        "ssl.key.password": "key-pw",
        "authentication.method": "BASIC",
        "authentication.users.file": str(users),
        "authentication.roles": "admin,readonly",
        "authentication.readonly.roles": "readonly",
    }
    with RegistryProcess(work, settings=settings) as registry:
        yield registry, ca, users


def _confluent(registry, ca, user_info):
    conf = {"url": registry.url, "ssl.ca.location": str(ca.pem)}
    if user_info:
        conf["basic.auth.user.info"] = user_info
    return SchemaRegistryClient(conf)


def test_confluent_client_registers_and_reads_over_https_with_basic_auth(secured):
    registry, ca, _ = secured
    client = _confluent(registry, ca, f"admin:{ADMIN_PASSWORD}")
    schema_id = client.register_schema("logins-value", Schema(SCHEMA, "AVRO"))
    assert client.get_schema(schema_id).schema_str
    reader = _confluent(registry, ca, f"reader:{READER_PASSWORD}")
    assert reader.get_latest_version("logins-value").schema_id == schema_id
    assert reader.get_subjects() == ["logins-value"]


def test_read_only_role_cannot_write(secured):
    registry, ca, _ = secured
    reader = _confluent(registry, ca, f"reader:{READER_PASSWORD}")
    with pytest.raises(SchemaRegistryError) as refused:
        reader.register_schema("other-value", Schema(SCHEMA, "AVRO"))
    assert refused.value.http_status_code == 403
    assert refused.value.error_code == 40301
    with pytest.raises(SchemaRegistryError) as refused:
        reader.set_compatibility("logins-value", "NONE")
    assert refused.value.error_code == 40301
    admin = _confluent(registry, ca, f"admin:{ADMIN_PASSWORD}")
    assert "other-value" not in admin.get_subjects()


@pytest.mark.parametrize(
    "auth",
    [None, ("admin", "wrong"), ("nobody", ADMIN_PASSWORD), ("admin", "")],
    ids=["none", "wrong-password", "unknown-user", "empty-password"],
)
def test_missing_or_wrong_credentials_get_401_with_a_challenge(secured, auth):
    registry, ca, _ = secured
    with httpx.Client(verify=ssl.create_default_context(cafile=ca.pem)) as http:
        answer = http.get(f"{registry.url}/subjects", auth=auth)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Basic realm="SchemaRegistry"'
    assert answer.json() == {"error_code": 401, "message": "Unauthorized"}


def test_garbage_authorization_headers_get_401(secured):
    registry, ca, _ = secured
    with httpx.Client(verify=ssl.create_default_context(cafile=ca.pem)) as http:
        for header in ("Basic !!!", "Basic " + "YWRtaW4=", "Bearer abc", "Basic"):
            answer = http.get(f"{registry.url}/subjects", headers={"Authorization": header})
            assert answer.status_code == 401, header


def test_a_user_without_an_allowed_role_gets_403(secured):
    registry, ca, _ = secured
    with pytest.raises(OurRegistryError) as refused:
        with RegistryClient(
            registry.url, basic_auth_user_info="outsider:outsider-pw", ssl_ca_location=str(ca.pem)
        ) as client:
            client.subjects()
    assert (refused.value.status, refused.value.error_code) == (403, 40301)


def test_our_client_with_credentials(secured):
    registry, ca, _ = secured
    with RegistryClient(
        registry.url,
        basic_auth_user_info=f"admin:{ADMIN_PASSWORD}",
        ssl_ca_location=str(ca.pem),
    ) as client:
        schema_id = client.register("ours-value", SCHEMA)
        assert client.schema(schema_id)


def test_plain_http_and_old_tls_are_refused(secured):
    registry, ca, _ = secured
    with pytest.raises(httpx.HTTPError):
        httpx.get(registry.url.replace("https://", "http://") + "/subjects", timeout=5)
    old = ssl.create_default_context(cafile=ca.pem)
    with warnings.catch_warnings():  # deprecated: the very reason they must be refused
        warnings.simplefilter("ignore", DeprecationWarning)
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((httpx.HTTPError, ssl.SSLError)):
        httpx.get(f"{registry.url}/subjects", verify=old, timeout=5)


def test_users_added_while_running_get_in(secured):
    registry, ca, users = secured
    assert _passwd(users, "late", "late-pw", "admin").returncode == 0
    with RegistryClient(
        registry.url, basic_auth_user_info="late:late-pw", ssl_ca_location=str(ca.pem)
    ) as client:
        assert isinstance(client.subjects(), list)


def test_no_secret_reaches_the_log(secured):
    registry, ca, _ = secured
    with httpx.Client(verify=ssl.create_default_context(cafile=ca.pem)) as http:
        http.get(f"{registry.url}/subjects", auth=("admin", "a-wrong-guess-pw"))
    log = registry.log_path.read_text()
    for secret in (ADMIN_PASSWORD, READER_PASSWORD, "a-wrong-guess-pw", "key-pw"):
        assert secret not in log


# -- the pieces, without a process -----------------------------------------------------


def test_users_file_refuses_plain_text_passwords_and_duplicates():
    with pytest.raises(UsersFileError, match="line 1.*not a pbkdf2-sha256 hash"):
        parse_users("admin: s3cret,admin\n")
    line = user_line("a", "pw", ["r"], iterations=1000)
    with pytest.raises(UsersFileError, match="line 3.*twice"):
        parse_users(f"# users\n{line}\n{line}\n")
    assert parse_users(f"{line}  # trailing comment\n")["a"].roles == {"r"}


def test_policy_decisions(tmp_path):
    users = tmp_path / "users"
    users.write_text(
        "\n".join(
            [
                user_line("w", "pw", ["dev"], iterations=1000),
                user_line("r", "pw", ["ro"], iterations=1000),
                user_line("both", "pw", ["ro", "dev"], iterations=1000),
            ]
        )
    )
    policy = AuthPolicy(Users(users), "R", frozenset(), frozenset({"ro"}))

    def basic(user):
        import base64

        return "Basic " + base64.b64encode(f"{user}:pw".encode()).decode()

    assert policy.decide("POST", basic("w")) is None
    assert policy.decide("GET", basic("r")) is None
    assert policy.decide("DELETE", basic("r"))[0] == 403
    assert policy.decide("PUT", basic("both")) is None  # a writing role besides read-only
    assert policy.decide("GET", None)[0] == 401


def test_passwd_replaces_a_user(tmp_path):
    users = tmp_path / "users"
    assert "added" in _passwd(users, "u", "one", "a").stdout
    assert "replaced" in _passwd(users, "u", "two", "b").stdout
    parsed = parse_users(users.read_text())
    assert list(parsed) == ["u"] and parsed["u"].roles == {"b"}
    assert Users(users).authenticate("u", "two") and not Users(users).authenticate("u", "one")
    assert _passwd(users, "bad:name", "pw").returncode == 2


def test_config_errors_name_the_key_and_hide_secrets(tmp_path):
    base = {"kafkastore.type": "memory"}
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        RegistryConfig.from_mapping(base | {"listeners": "https://127.0.0.1:8443"})
    with pytest.raises(ConfigError, match="authentication.users.file"):
        RegistryConfig.from_mapping(base | {"authentication.method": "BASIC"})
    with pytest.raises(ConfigError) as unknown:
        RegistryConfig.from_mapping(base | {"ssl.key.pasword": "hunter2"})
    assert "hunter2" not in str(unknown.value) and "ssl.key.pasword" in str(unknown.value)
