"""An Idempotency-Key remembers the resource its request created, in the transaction that created it, so
that a retry after a lost answer is answered with that resource rather than refused.

Revision ID: 0024
Revises: 0023
"""

import sqlalchemy as sa
from alembic import op

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('idempotency_keys', sa.Column('resource_id', sa.Text))


def downgrade() -> None:
    op.drop_column('idempotency_keys', 'resource_id')
