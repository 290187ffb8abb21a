from __future__ import annotations

import pytest

from osmosis_ai.auth import settings
from osmosis_ai.auth.errors import PlatformURLError


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://Platform.Osmosis.AI/", "https://platform.osmosis.ai"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://localhost:3000/", "http://localhost:3000"),
        ("http://[::1]:3000", "http://[::1]:3000"),
    ],
)
def test_platform_urls_are_normalised(url: str, expected: str):
    assert settings.normalize_platform_url(url) == expected


@pytest.mark.parametrize(
    "url", ["http://platform.example.com", "ftp://x", "platform.osmosis.ai", "http://10.0.0.1"]
)
def test_tokens_are_not_sent_in_clear_text_beyond_loopback(url: str):
    with pytest.raises(PlatformURLError):
        settings.normalize_platform_url(url)


def test_the_platform_url_is_read_when_asked(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OSMOSIS_PLATFORM_URL", raising=False)
    assert settings.platform_url() == settings.DEFAULT_PLATFORM_URL
    monkeypatch.setenv("OSMOSIS_PLATFORM_URL", "https://staging.example.com/")
    assert settings.platform_url() == "https://staging.example.com"
    import osmosis_ai.auth

    assert osmosis_ai.auth.PLATFORM_URL == "https://staging.example.com"


def test_config_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path):
    monkeypatch.delenv("OSMOSIS_CONFIG_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert settings.credentials_file() == tmp_path / "osmosis" / "credentials.json"
    monkeypatch.setenv("OSMOSIS_CONFIG_DIR", str(tmp_path / "own"))
    assert settings.config_dir() == tmp_path / "own"
