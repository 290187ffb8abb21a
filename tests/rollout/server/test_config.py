"""``ServerConfig``: the keyword parameters of ``create_app`` and ``serve_agent_loop`` map onto it, a
keyword together with a config is refused, and a served app follows what the config says."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from osmosis_ai.rollout.config.settings import RolloutServerSettings, RolloutSettings, reset_settings
from osmosis_ai.rollout.core.exceptions import RolloutValueError
from osmosis_ai.rollout.server import ServerConfig, create_app, serve_agent_loop
from osmosis_ai.rollout.server.config import from_keywords
from tests.support.server import RunningServer, ScriptedAgent, fast_config, fast_settings


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    """The process settings read from this test's environment, and forgotten after it."""
    reset_settings()
    yield
    reset_settings()


async def _startup() -> None:
    pass


async def _shutdown() -> None:
    pass


def test_the_create_app_keywords_of_0_2_map_onto_the_config():
    settings = fast_settings()
    credentials = object()
    config = from_keywords(
        "create_app",
        None,
        max_concurrent=8,
        record_ttl_seconds=0.5,  # below the environment's range: a program may ask for it
        settings=settings,
        credentials=credentials,
        server_host="10.0.0.5",
        server_port=9100,
        api_key="k",
        debug_dir="/tmp/traces",
        on_startup=_startup,
        on_shutdown=_shutdown,
    )
    assert config.server.max_concurrent_rollouts == 8
    assert config.server.record_ttl_seconds == 0.5
    assert config.server.request_timeout_seconds == settings.server.request_timeout_seconds
    assert config.client == settings.client
    assert (config.host, config.port, config.credentials, config.registers) == (
        "10.0.0.5",
        9100,
        credentials,
        True,
    )
    assert (config.api_key, config.debug_dir) == ("k", "/tmp/traces")
    assert (config.on_startup, config.on_shutdown) == (_startup, _shutdown)
    assert settings.server.max_concurrent_rollouts == 100  # the settings given are left as they were


def test_the_positional_0_2_call_of_create_app_serves_what_it_says(http):
    app = create_app(ScriptedAgent(), 3, 120.0, fast_settings(), None, None, None, "the-key")
    server = RunningServer(app).start()
    try:
        health = http.get(f"{server.url}/platform/health", headers={"Authorization": "Bearer the-key"})
    finally:
        server.stop()
    assert health.status_code == 200
    assert health.json()["max_concurrent_rollouts"] == 3


def test_a_config_serves_what_it_says(serve, http):
    config = fast_config(
        api_key="k", server=fast_settings(max_queued_rollouts=2, max_concurrent_rollouts=4).server
    )
    server = serve(ScriptedAgent(), config=config)
    assert http.get(f"{server.url}/platform/health").status_code == 401
    health = http.get(f"{server.url}/health").json()
    assert (health["max_concurrent_rollouts"], health["max_queued_rollouts"]) == (4, 2)


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"api_key": "k"}, "api_key -> ServerConfig(api_key=...)"),
        ({"max_concurrent": 4}, "max_concurrent -> ServerConfig(server=RolloutServerSettings(max_concurrent_rollouts=...))"),
        ({"server_host": "h", "server_port": 1}, "server_host -> ServerConfig(host=...); server_port -> ServerConfig(port=...)"),
    ],
)  # fmt: skip
def test_create_app_refuses_a_config_and_keywords_together(keywords, named):
    with pytest.raises(RolloutValueError) as refused:
        create_app(ScriptedAgent(), config=fast_config(), **keywords)
    message = str(refused.value)
    assert message.startswith("create_app() got config= and ")
    assert named in message


def test_serve_agent_loop_refuses_a_config_and_keywords_together_before_binding():
    with pytest.raises(RolloutValueError, match=r"serve_agent_loop\(\) got config= and host=, port="):
        serve_agent_loop(ScriptedAgent(), host="127.0.0.1", port=1, config=fast_config(), validate=False)


def test_keywords_left_at_none_are_not_given():
    config = fast_config(api_key="k")
    assert create_app(ScriptedAgent(), None, None, None, config=config) is not None


@pytest.mark.parametrize(
    "fields",
    [{"max_request_bytes": 0}, {"max_concurrent_inits": -1}, {"port": 70000}],
)
def test_nonsense_values_are_refused_by_name(fields):
    (name,) = fields
    with pytest.raises(RolloutValueError, match=name):
        fast_config(**fields)


def test_environment_knobs_default_to_the_environment(monkeypatch, fresh_settings):
    monkeypatch.setenv("OSMOSIS_ROLLOUT_SERVER_MAX_QUEUED_ROLLOUTS", "7")
    monkeypatch.setenv("OSMOSIS_ROLLOUT_CLIENT_TIMEOUT_SECONDS", "12")
    config = ServerConfig()
    assert config.server.max_queued_rollouts == 7
    assert config.client.timeout_seconds == 12
    keywords = from_keywords("create_app", None, api_key="k")
    assert (keywords.server, keywords.client) == (config.server, config.client)


def test_settings_knobs_have_one_home():
    names = {field.name for field in dataclasses.fields(ServerConfig)} - {"server", "client"}
    duplicated = names & (set(RolloutServerSettings.model_fields) | set(RolloutSettings.model_fields))
    assert duplicated == set()  # what the environment sets lives in server/client only


def test_the_api_key_and_credentials_stay_out_of_the_repr():
    shown = repr(fast_config(api_key="osm_rollout_secret", credentials="platform-token"))
    assert "osm_rollout_secret" not in shown and "platform-token" not in shown
    assert "api_key='***'" in shown
