"""The exception tree survives copy and pickle with its attributes (the database writer hands
every waiter of a failed batch a copy of the batch's error; a CorruptionError could not be
copied, so a LostDataError found at a reconnect surfaced as a TypeError)."""

from __future__ import annotations

import copy
import pickle

import pytest

from store import errors


def _made(cls: type[errors.StoreError]) -> errors.StoreError:
    if issubclass(cls, errors.CorruptionError):
        return cls("t_messages", 42, "gone", hint="look")
    return cls("it failed", hint="look")


@pytest.mark.parametrize("name", errors.__all__)
def test_every_store_error_survives_copy_and_pickle(name: str) -> None:
    cls = getattr(errors, name)
    made = _made(cls)
    for again in (copy.copy(made), pickle.loads(pickle.dumps(made))):
        assert type(again) is cls
        assert str(again) == str(made)
        assert vars(again) == vars(made)
