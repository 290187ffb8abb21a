"""The server API key: generation, extraction from ``Authorization`` headers, constant-time checks.

The key (``osm_rollout_`` + 43 URL-safe characters) is what TrainGate and the Platform's health
checker present to the RolloutServer. It lives in memory only. A key chosen by the user must have
at least :data:`MIN_API_KEY_LENGTH` characters (:func:`check_api_key`). Comparisons work on bytes, so a
token with non-ASCII characters is simply a wrong key (401), never a crash.
"""

from __future__ import annotations

import hmac
import secrets

API_KEY_PREFIX = "osm_rollout_"
API_KEY_RANDOM_BYTES = 32
MIN_API_KEY_LENGTH = 16  # guessing one of 16 characters over HTTP is out of reach; 5 are not


def generate_api_key() -> str:
    """A fresh random server key: the prefix plus 32 random bytes, URL-safe base64 (55 characters)."""
    return API_KEY_PREFIX + secrets.token_urlsafe(API_KEY_RANDOM_BYTES)


def check_api_key(key: str) -> None:
    """``ValueError`` naming the fix for a chosen server key that is too short to protect the server."""
    if len(key) < MIN_API_KEY_LENGTH:
        raise ValueError(
            f"the server API key has {len(key)} characters; use at least {MIN_API_KEY_LENGTH} characters "
            "(or leave it out to generate one)"
        )


def _as_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def extract_bearer_token(header: str | bytes | None) -> bytes | None:
    """The token carried by an ``Authorization`` header value, as bytes (``None`` when empty).

    ``Bearer <token>`` (any case) yields ``<token>``; any other non-empty value is taken whole as a
    raw token, as the protocol defines (so ``Authorization: <key>`` works and ``Basic <key>`` does
    not match).
    """
    if header is None:
        return None
    value = _as_bytes(header).strip()
    if not value:
        return None
    parts = value.split()
    if len(parts) == 2 and parts[0].lower() == b"bearer":
        return parts[1]
    return value


def validate_api_key(provided_key: str | bytes | None, expected_key: str | bytes | None) -> bool:
    """True when ``provided_key`` equals ``expected_key``, compared in constant time; ``None`` never matches."""
    if provided_key is None or expected_key is None:
        return False
    return hmac.compare_digest(_as_bytes(provided_key), _as_bytes(expected_key))


def authorized(header: str | bytes | None, expected: str | bytes | None) -> bool:
    """True when ``expected`` is ``None`` (auth disabled) or the header carries exactly that key."""
    if expected is None:
        return True
    return validate_api_key(extract_bearer_token(header), expected)
