"""The labelling job follows each network's final block with a cursor of its own (decision 281): the
indexer's range commit no longer queues the owners of newly final transfers. A network already indexed
starts at its final block (its commits queued everything up to there); a new one is created by the job at
the start of its index.

Revision ID: 0026
Revises: 0024
"""

import sqlalchemy as sa
from alembic import op

revision = '0026'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'label_cursors',
        sa.Column('network', sa.Text, primary_key=True),
        sa.Column('block_number', sa.BigInteger, nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.execute("INSERT INTO label_cursors (network, block_number) "
               "SELECT network, coalesce(final_block, block_number) FROM chain_cursors")


def downgrade() -> None:
    op.drop_table('label_cursors')
