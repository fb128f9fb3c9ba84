"""Alembic environment of the store's schema: all logic lives in store.db.migrate.run_env."""

from alembic import context

from store.db.migrate import run_env

run_env(context)
