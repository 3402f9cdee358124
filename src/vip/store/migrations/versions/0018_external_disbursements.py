"""Transactions that paid a charge without being signed by the service (another tool holding the operator
key) are recorded with status `external`, so a reorg that removes them is caught like one of ours: the
partial index of what the charge execution job re-checks covers them too.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None

MINED = "status = 'mined'"
MINED_OR_EXTERNAL = "status IN ('mined', 'external')"


def upgrade() -> None:
    op.drop_index('ix_disbursement_transactions_mined', table_name='disbursement_transactions',
                  postgresql_where=sa.text(MINED))
    op.create_index('ix_disbursement_transactions_mined', 'disbursement_transactions',
                    ['network', 'block_number'], unique=False, postgresql_where=sa.text(MINED_OR_EXTERNAL))


def downgrade() -> None:
    op.drop_index('ix_disbursement_transactions_mined', table_name='disbursement_transactions',
                  postgresql_where=sa.text(MINED_OR_EXTERNAL))
    op.create_index('ix_disbursement_transactions_mined', 'disbursement_transactions',
                    ['network', 'block_number'], unique=False, postgresql_where=sa.text(MINED))
