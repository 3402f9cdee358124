"""Whether an intent's approval instructions start with approve(0): a USDT intent created while its funding
wallet's allowance to the spender was not zero (USDT refuses to change a non-zero allowance to another);
and an index of the mined disbursement transactions by block, which the charge execution job re-checks
until they are final (a reorg may remove them).

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('payment_intents', sa.Column('approval_reset_required', sa.Boolean(), nullable=False,
                                               server_default=sa.text('false')))
    op.create_index('ix_disbursement_transactions_mined', 'disbursement_transactions',
                    ['network', 'block_number'], unique=False, postgresql_where=sa.text("status = 'mined'"))


def downgrade() -> None:
    op.drop_index('ix_disbursement_transactions_mined', table_name='disbursement_transactions',
                  postgresql_where=sa.text("status = 'mined'"))
    op.drop_column('payment_intents', 'approval_reset_required')
