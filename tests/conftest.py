"""Shared fixtures."""

import pytest


@pytest.fixture(scope="session")
def models():
    """The Stan programs, compiled once per test session (in parallel processes; cached
    on disk by httpstan / in the user cache for CmdStan)."""
    from pydial.stan import precompile

    return precompile()
