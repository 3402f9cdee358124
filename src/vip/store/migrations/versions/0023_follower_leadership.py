"""One follower per network at a time: the daemon that takes a network's lead (it holds the network's
advisory lock) raises the cursor row's fencing token and names itself; every range commit, reorg repair
and live mark checks the token under the cursor row lock, so a deposed leader can never commit.

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('chain_cursors', sa.Column('leader_token', sa.BigInteger, nullable=False,
                                             server_default=sa.text('0')))
    op.add_column('chain_cursors', sa.Column('leader', sa.Text))
    op.add_column('chain_cursors', sa.Column('leader_since', sa.DateTime(timezone=True)))


def downgrade() -> None:
    op.drop_column('chain_cursors', 'leader_since')
    op.drop_column('chain_cursors', 'leader')
    op.drop_column('chain_cursors', 'leader_token')
