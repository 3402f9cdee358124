"""platform tokens: the sealed OAuth tokens of active platform connections, for re-pulls on refresh

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22 07:30:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Connections made before this revision have no token: they are not re-pulled until reconnected.
    op.create_table('platform_tokens',
    sa.Column('connection_id', sa.Text(), nullable=False),
    sa.Column('access_token', sa.LargeBinary(), nullable=False),
    sa.Column('refresh_token', sa.LargeBinary(), nullable=True),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['connection_id'], ['connections.id'], name=op.f('fk_platform_tokens_connection_id_connections')),
    sa.PrimaryKeyConstraint('connection_id', name=op.f('pk_platform_tokens'))
    )


def downgrade() -> None:
    op.drop_table('platform_tokens')
