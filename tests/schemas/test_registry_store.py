"""The store log: its entry format, replay after a restart, and the start-up command."""

import signal

import httpx
import pytest

from broker.config.definition import parse_properties
from broker.processes import ROOT, RegistryProcess
from schemas import catalog
from schemas.compatibility import Level
from schemas.registry.__main__ import main
from schemas.registry.config import REGISTRY_CONFIG, ConfigError, RegistryConfig
from schemas.store import InMemoryStore

V1 = catalog.load_str("PageViewEvent.v1")
V2 = catalog.load_str("PageViewEvent.v2")
AUDIT = catalog.load_str("AuditEvent")


def test_restart_replays_to_the_same_state(registry_server, registry_snapshot):
    store = InMemoryStore()
    server = registry_server(store)
    with server as url, httpx.Client(base_url=url) as http:
        id_pv1 = http.post("/subjects/pv-value/versions", json={"schema": V1}).json()["id"]
        http.post("/subjects/pv-value/versions", json={"schema": V2})
        http.post("/subjects/audit-value/versions", json={"schema": AUDIT})
        http.post("/subjects/gone-value/versions", json={"schema": catalog.load_str("ClickEvent")})
        http.post("/subjects/copy-value/versions", json={"schema": V1})
        http.delete("/subjects/gone-value")
        http.delete("/subjects/gone-value?permanent=true")
        http.delete("/subjects/pv-value/versions/1")
        http.put("/config", json={"compatibility": "FULL_TRANSITIVE"})
        http.put("/config/audit-value", json={"compatibility": "NONE"})
        before = registry_snapshot(http)

    # A new registry on the same log: same subjects, versions, ids and configs.
    server = registry_server(store, Level.BACKWARD)
    with server as url, httpx.Client(base_url=url) as http:
        assert registry_snapshot(http) == before
        assert before["config"] == {"compatibilityLevel": "FULL_TRANSITIVE"}
        assert before["subjects"]["pv-value"]["live"] == [2]
        assert "gone-value" not in before["subjects"]
        # Ids continue after the highest ever handed out, deleted ones included.
        new_id = http.post(
            "/subjects/new-value/versions", json={"schema": catalog.load_str("SearchEvent")}
        )
        assert new_id.json()["id"] == 5
        assert http.post("/subjects/copy-value", json={"schema": V1}).json()["id"] == id_pv1


def test_entries_follow_the_confluent_layout(registry_server):
    store = InMemoryStore()
    server = registry_server(store)
    with server as url, httpx.Client(base_url=url) as http:
        http.post("/subjects/a-value/versions", json={"schema": AUDIT})
        http.put("/config/a-value", json={"compatibility": "FULL"})
        http.delete("/subjects/a-value")
        http.delete("/subjects/a-value?permanent=true")
    entries = list(store.replay())
    keys = [key for key, _ in entries]
    assert keys[0] == {"keytype": "SCHEMA", "subject": "a-value", "version": 1, "magic": 1}
    assert entries[0][1] == {
        "subject": "a-value",
        "version": 1,
        "id": 1,
        "schema": entries[0][1]["schema"],
        "deleted": False,
    }
    assert keys[1] == {"keytype": "CONFIG", "subject": "a-value", "magic": 0}
    assert entries[1][1] == {"compatibilityLevel": "FULL"}
    assert keys[2] == {"keytype": "DELETE_SUBJECT", "subject": "a-value", "magic": 0}
    assert entries[2][1] == {"subject": "a-value", "version": 1}
    # A permanent delete tombstones every version key, and the subject's config.
    assert entries[3] == (keys[0], None)
    assert entries[4] == (keys[1], None)


# -- configuration -------------------------------------------------------------


def test_defaults_and_confluent_style_servers():
    config = RegistryConfig.from_mapping(
        parse_properties("kafkastore.bootstrap.servers=PLAINTEXT://broker1:9092, broker2:9093\n")
    )
    assert config.bootstrap_servers == ["broker1:9092", "broker2:9093"]
    assert (config.listener.host, config.listener.port) == ("0.0.0.0", 8081)
    assert config.topic == "_schemas"
    assert config.compatibility_level is Level.BACKWARD


def test_repo_config_is_valid():
    config = RegistryConfig.from_file(ROOT / "conf" / "registry.properties")
    assert config.store_type == "kafka"
    assert config.topic == "_schemas"


def test_conf_file_is_generated_from_the_registry_keys():
    from schemas.registry.config import SAMPLE_HEADER, SAMPLE_SETTINGS

    committed = (ROOT / "conf" / "registry.properties").read_text()
    assert committed == REGISTRY_CONFIG.to_properties(SAMPLE_SETTINGS, SAMPLE_HEADER), (
        "regenerate: python -m schemas.registry config-docs --properties > conf/registry.properties"
    )


@pytest.mark.parametrize(
    "text, named",
    [
        (
            "kafkastore.type=memory\nschema.compatibility.level=sideways\n",
            "'sideways' for configuration schema.compatibility.level",
        ),
        (
            "kafkastore.type=memory\nlisteners=ftp://0.0.0.0:8081\n",
            "'ftp://0.0.0.0:8081' for configuration listeners",
        ),
        (
            "kafkastore.type=memory\nlisteners=http://localhost\n",
            "'http://localhost' for configuration listeners",
        ),
        (
            "kafkastore.type=memory\nkafkastore.topic=bad topic\n",
            "'bad topic' for configuration kafkastore.topic",
        ),
        (
            "kafkastore.type=memory\nkafkastore.timeout.ms=-5\n",
            "'-5' for configuration kafkastore.timeout.ms",
        ),
        ("kafkastore.type=file\n", "'file' for configuration kafkastore.type"),
        (
            "kafkastore.bootstrap.servers=SSL://b:9093\n",
            "'SSL://b:9093' for configuration kafkastore.bootstrap.servers",
        ),
        ("kafkastore.type=kafka\n", "'kafkastore.bootstrap.servers' is required"),
        (
            "kafkastore.type=memory\nkafkastore.topics=x\n",
            "Unknown configuration 'kafkastore.topics' (value 'x')",
        ),
        # Java's properties rules: the key ends at white space too.
        (
            "kafkastore.type memory\nkafkastore.timeout.ms -5\n",
            "'-5' for configuration kafkastore.timeout.ms",
        ),
    ],
)
def test_bad_config_is_refused_naming_key_and_value(text, named):
    with pytest.raises(ConfigError) as refused:
        RegistryConfig.from_mapping(parse_properties(text))
    assert named in str(refused.value)


def test_start_with_bad_config_exits_with_the_reason(tmp_path, capsys):
    path = tmp_path / "registry.properties"
    path.write_text("kafkastore.type=memory\nschema.compatibility.level=sideways\n")
    assert main(["start", str(path)]) == 2
    err = capsys.readouterr().err
    assert "schema.compatibility.level" in err and "sideways" in err
    assert main(["start", str(tmp_path / "missing.properties")]) == 2
    # A bad --override is refused the same way, naming its key and value.
    path.write_text("kafkastore.type=memory\n")
    assert main(["start", str(path), "--override", "kafkastore.timeout.ms=soon"]) == 2
    err = capsys.readouterr().err
    assert "kafkastore.timeout.ms" in err and "soon" in err


def test_start_command_serves_the_api(tmp_path):
    settings = {"kafkastore.type": "memory", "schema.compatibility.level": "none"}
    overrides = {"schema.compatibility.level": "full"}  # --override wins over the file
    with RegistryProcess(tmp_path, settings=settings, overrides=overrides) as registry:
        url = registry.url
        assert httpx.get(f"{url}/config").json() == {"compatibilityLevel": "FULL"}
        answer = httpx.post(f"{url}/subjects/a-value/versions", json={"schema": AUDIT})
        assert answer.json() == {"id": 1}
        assert registry.stop(timeout_s=10) != -signal.SIGKILL  # it stopped on SIGTERM


def test_configuration_reference_has_the_registry_keys():
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert REGISTRY_CONFIG.to_markdown() in text, "regenerate: docs/gen_configuration.sh"
