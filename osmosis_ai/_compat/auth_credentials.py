"""0.2's ``osmosis_ai.auth.credentials``: the credential functions, over :mod:`osmosis_ai.auth.store`,
for the current Platform.

Each works on the workspaces of the Platform that ``OSMOSIS_PLATFORM_URL`` names (the public one by
default). Workspaces are found by key (organization id) or by organization name.
"""

from __future__ import annotations

from osmosis_ai.auth import store
from osmosis_ai.auth.store import CredentialsStore, OrganizationInfo, UserInfo, WorkspaceCredentials

__all__ = [
    "CredentialsStore",
    "OrganizationInfo",
    "UserInfo",
    "WorkspaceCredentials",
    "delete_credentials",
    "delete_workspace_credentials",
    "get_active_workspace",
    "get_all_workspaces",
    "get_valid_credentials",
    "load_credentials",
    "save_credentials",
    "set_active_workspace",
]


def save_credentials(credentials: WorkspaceCredentials) -> None:
    """Add or replace this workspace's credentials and make it the active workspace."""
    store.save(credentials)


def load_credentials() -> WorkspaceCredentials | None:
    """The active workspace's credentials, expired or not; ``None`` when not logged in."""
    return store.current_store().get_active_credentials()


def get_valid_credentials() -> WorkspaceCredentials | None:
    """The active workspace's credentials if neither expired nor rejected by the Platform."""
    credentials = load_credentials()
    return credentials if credentials is not None and credentials.is_usable() else None


def delete_credentials() -> bool:
    """Forget every workspace of the current Platform; whether there was any."""
    return bool(store.remove(None))


def delete_workspace_credentials(workspace_name: str) -> bool:
    """Forget one workspace (by name or key); ``False`` if unknown. Another one becomes active."""
    key = store.current_store().find(workspace_name)
    return key is not None and bool(store.remove([key]))


def get_all_workspaces() -> list[tuple[str, WorkspaceCredentials, bool]]:
    """``(name, credentials, is_active)`` for each workspace, in the order they were added."""
    current = store.current_store()
    return [(c.workspace_name, c, key == current.active_workspace) for key, c in current.workspaces.items()]


def get_active_workspace() -> str | None:
    """The active workspace's name, or ``None``."""
    active = store.current_store().get_active_credentials()
    return active.workspace_name if active is not None else None


def set_active_workspace(workspace_name: str) -> bool:
    """Make a workspace (by name or key) the active one; ``False`` if unknown."""
    return store.activate(workspace_name) is not None
