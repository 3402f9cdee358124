"""Webhook endpoints failing for days are disabled: since when an endpoint has only failed, and when it
was disabled (docs/webhooks.md, "Endpoints that keep failing").

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('webhook_endpoints', sa.Column('failing_since', sa.DateTime(timezone=True), nullable=True))
    op.add_column('webhook_endpoints', sa.Column('disabled_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('webhook_endpoints', sa.Column('disabled_reason', sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column('webhook_endpoints', 'disabled_reason')
    op.drop_column('webhook_endpoints', 'disabled_at')
    op.drop_column('webhook_endpoints', 'failing_since')
