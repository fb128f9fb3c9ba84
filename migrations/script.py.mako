"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

Table names come from the configuration: use store.db.migrate.migration_names(), never
literal names.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from store.db.migrate import migration_names

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    names = migration_names()
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    names = migration_names()
    ${downgrades if downgrades else "pass"}
