"""chain tables, watched addresses, reorg log, event outbox

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-22 03:05:41.670268
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('block_headers',
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('block_number', sa.BigInteger(), nullable=False),
    sa.Column('block_hash', sa.Text(), nullable=False),
    sa.Column('parent_hash', sa.Text(), nullable=False),
    sa.Column('block_timestamp', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('network', 'block_number', name=op.f('pk_block_headers'))
    )
    op.create_table('chain_cursors',
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('chain_id', sa.BigInteger(), nullable=False),
    sa.Column('block_number', sa.BigInteger(), nullable=False),
    sa.Column('block_hash', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('network', name=op.f('pk_chain_cursors'))
    )
    op.create_table('chain_reorgs',
    sa.Column('id', sa.BigInteger(), autoincrement=True, nullable=False),
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('detected_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('old_head_number', sa.BigInteger(), nullable=False),
    sa.Column('old_head_hash', sa.Text(), nullable=True),
    sa.Column('fork_block_number', sa.BigInteger(), nullable=False),
    sa.Column('depth', sa.BigInteger(), nullable=False),
    sa.Column('beyond_finality', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_chain_reorgs'))
    )
    op.create_table('outbox_events',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=True),
    sa.Column('type', sa.Text(), nullable=False),
    sa.Column('api_version', sa.Text(), server_default=sa.text("'v1'"), nullable=False),
    sa.Column('data', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('seq', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_outbox_events')),
    sa.UniqueConstraint('seq', name=op.f('uq_outbox_events_seq'))
    )
    op.create_index(op.f('ix_outbox_events_type_created_at'), 'outbox_events', ['type', 'created_at'], unique=False)
    op.create_table('token_approvals',
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('tx_hash', sa.Text(), nullable=False),
    sa.Column('log_index', sa.Integer(), nullable=False),
    sa.Column('block_number', sa.BigInteger(), nullable=False),
    sa.Column('block_hash', sa.Text(), nullable=False),
    sa.Column('block_timestamp', sa.DateTime(timezone=True), nullable=False),
    sa.Column('token', sa.Text(), nullable=False),
    sa.Column('token_address', sa.Text(), nullable=False),
    sa.Column('owner_address', sa.Text(), nullable=False),
    sa.Column('spender_address', sa.Text(), nullable=False),
    sa.Column('amount', sa.Numeric(precision=78, scale=0), nullable=False),
    sa.PrimaryKeyConstraint('network', 'tx_hash', 'log_index', name=op.f('pk_token_approvals'))
    )
    op.create_index(op.f('ix_token_approvals_network_block_number'), 'token_approvals', ['network', 'block_number'], unique=False)
    op.create_index(op.f('ix_token_approvals_network_owner_address_spender_address_block_number'), 'token_approvals', ['network', 'owner_address', 'spender_address', 'block_number'], unique=False)
    op.create_table('token_transfers',
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('tx_hash', sa.Text(), nullable=False),
    sa.Column('log_index', sa.Integer(), nullable=False),
    sa.Column('block_number', sa.BigInteger(), nullable=False),
    sa.Column('block_hash', sa.Text(), nullable=False),
    sa.Column('block_timestamp', sa.DateTime(timezone=True), nullable=False),
    sa.Column('token', sa.Text(), nullable=False),
    sa.Column('token_address', sa.Text(), nullable=False),
    sa.Column('from_address', sa.Text(), nullable=False),
    sa.Column('to_address', sa.Text(), nullable=False),
    sa.Column('amount', sa.Numeric(precision=78, scale=0), nullable=False),
    sa.PrimaryKeyConstraint('network', 'tx_hash', 'log_index', name=op.f('pk_token_transfers'))
    )
    op.create_index(op.f('ix_token_transfers_network_block_number'), 'token_transfers', ['network', 'block_number'], unique=False)
    op.create_index(op.f('ix_token_transfers_network_from_address_block_number'), 'token_transfers', ['network', 'from_address', 'block_number'], unique=False)
    op.create_index(op.f('ix_token_transfers_network_to_address_block_number'), 'token_transfers', ['network', 'to_address', 'block_number'], unique=False)
    op.create_table('watched_addresses',
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('address', sa.Text(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('start_block', sa.BigInteger(), nullable=True),
    sa.Column('start_time', sa.DateTime(timezone=True), nullable=True),
    sa.Column('live_from_block', sa.BigInteger(), nullable=True),
    sa.Column('backfill_next_block', sa.BigInteger(), nullable=True),
    sa.Column('backfill_done_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('network', 'address', name=op.f('pk_watched_addresses'))
    )


def downgrade() -> None:
    op.drop_table('watched_addresses')
    op.drop_index(op.f('ix_token_transfers_network_to_address_block_number'), table_name='token_transfers')
    op.drop_index(op.f('ix_token_transfers_network_from_address_block_number'), table_name='token_transfers')
    op.drop_index(op.f('ix_token_transfers_network_block_number'), table_name='token_transfers')
    op.drop_table('token_transfers')
    op.drop_index(op.f('ix_token_approvals_network_owner_address_spender_address_block_number'), table_name='token_approvals')
    op.drop_index(op.f('ix_token_approvals_network_block_number'), table_name='token_approvals')
    op.drop_table('token_approvals')
    op.drop_index(op.f('ix_outbox_events_type_created_at'), table_name='outbox_events')
    op.drop_table('outbox_events')
    op.drop_table('chain_reorgs')
    op.drop_table('chain_cursors')
    op.drop_table('block_headers')
