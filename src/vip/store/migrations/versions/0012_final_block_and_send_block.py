"""The final block the follower computes per network (from the chain's `finalized`/`safe` tag or a depth),
and the block a disbursement was sent at (its `Disbursed` log is searched from there).

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('chain_cursors', sa.Column('final_block', sa.BigInteger(), nullable=True))
    op.add_column('disbursement_transactions', sa.Column('sent_from_block', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column('disbursement_transactions', 'sent_from_block')
    op.drop_column('chain_cursors', 'final_block')
