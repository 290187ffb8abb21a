"""What every login flow ends with: verify the token with the Platform, store it, report who logged in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from osmosis_ai.auth import store
from osmosis_ai.auth.client import verify_token
from osmosis_ai.auth.store import OrganizationInfo, UserInfo, WorkspaceCredentials


@dataclass
class LoginResult:
    """Who logged in, into which workspace, until when; ``revoked_previous_tokens`` is how many older
    tokens of this device the Platform revoked on the way."""

    user: UserInfo
    organization: OrganizationInfo
    expires_at: datetime
    revoked_previous_tokens: int = 0
    credentials: WorkspaceCredentials | None = None


def complete_login(token: str, *, base_url: str, revoked_count: int = 0) -> LoginResult:
    """Verify ``token`` with the Platform at ``base_url`` and store it as that workspace's credentials.

    Raises :class:`~osmosis_ai.auth.errors.LoginError` when the Platform does not confirm it.
    """
    credentials = store.save(verify_token(token, base_url=base_url))
    return LoginResult(
        user=credentials.user,
        organization=credentials.organization,
        expires_at=credentials.expires_at,
        revoked_previous_tokens=max(revoked_count, 0),
        credentials=credentials,
    )
