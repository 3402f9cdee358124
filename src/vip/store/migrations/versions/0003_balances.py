"""address balances (balanceOf at an indexed block, per watched address and token); index of transfer labels by wallet and class; transfers_first_block_at_or_after()

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 10:00:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

# The first block of a network's stored transfers whose timestamp is at or after a moment (one past the
# last stored block when none is): a binary search over the (network, block_number) index, about 25 index
# probes. Block timestamps never decrease along a chain, so `block_number >= f(net, t)` selects exactly
# the stored transfers with `block_timestamp >= t`: GET /v1/transactions turns a date window into a block
# window that its index scans can stop at.
FIRST_BLOCK_AT_OR_AFTER = """
CREATE OR REPLACE FUNCTION transfers_first_block_at_or_after(p_network text, p_at timestamptz)
RETURNS bigint LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    lo bigint;
    hi bigint;
    mid bigint;
    stamp timestamptz;
BEGIN
    SELECT min(block_number), max(block_number) + 1 INTO lo, hi
      FROM token_transfers WHERE network = p_network;
    IF lo IS NULL THEN
        RETURN 0;
    END IF;
    WHILE lo < hi LOOP
        mid := lo + (hi - lo) / 2;
        SELECT block_timestamp INTO stamp FROM token_transfers
         WHERE network = p_network AND block_number >= mid ORDER BY block_number LIMIT 1;
        IF stamp IS NULL OR stamp >= p_at THEN
            hi := mid;
        ELSE
            lo := mid + 1;
        END IF;
    END LOOP;
    RETURN lo;
END
$$
"""


def upgrade() -> None:
    op.create_table('address_balances',
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('address', sa.Text(), nullable=False),
    sa.Column('token', sa.Text(), nullable=False),
    sa.Column('balance', sa.Numeric(precision=78, scale=0), nullable=False),
    sa.Column('block_number', sa.BigInteger(), nullable=False),
    sa.Column('block_hash', sa.Text(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('network', 'address', 'token', name=op.f('pk_address_balances'))
    )
    op.create_index('ix_transfer_labels_network_wallet_address_classification', 'transfer_labels', ['network', 'wallet_address', 'classification'], unique=False)
    op.execute(FIRST_BLOCK_AT_OR_AFTER)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS transfers_first_block_at_or_after(text, timestamptz)")
    op.drop_index('ix_transfer_labels_network_wallet_address_classification', table_name='transfer_labels')
    op.drop_table('address_balances')
