"""payment intents, charges (one per intent), signed disbursement transactions, operator nonces

Revision ID: 0005
Revises: 0003
Create Date: 2026-11-22 06:30:00.000000
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('payment_intents',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('user_id', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('amount_usd', sa.Numeric(precision=38, scale=6), nullable=False),
    sa.Column('amount', sa.Numeric(precision=78, scale=0), nullable=False),
    sa.Column('token', sa.Text(), nullable=False),
    sa.Column('token_address', sa.Text(), nullable=False),
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('recipient_wallet', sa.Text(), nullable=False),
    sa.Column('funding_wallet', sa.Text(), nullable=False),
    sa.Column('contract_address', sa.Text(), nullable=False),
    sa.Column('chain_intent_id', sa.Text(), nullable=False),
    sa.Column('metadata', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"),
              nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('approval_tx_hash', sa.Text(), nullable=True),
    sa.Column('approval_confirmed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('seq', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'],
                            name=op.f('fk_payment_intents_organisation_id_organisations')),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_payment_intents_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_payment_intents')),
    sa.UniqueConstraint('chain_intent_id', name=op.f('uq_payment_intents_chain_intent_id')),
    sa.UniqueConstraint('seq', name=op.f('uq_payment_intents_seq'))
    )
    op.create_index(op.f('ix_payment_intents_status_network_created_at'), 'payment_intents',
                    ['status', 'network', 'created_at'], unique=False)
    op.create_index(op.f('ix_payment_intents_organisation_id_created_at'), 'payment_intents',
                    ['organisation_id', 'created_at'], unique=False)
    op.create_table('charges',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('payment_intent_id', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('approval_tx_hash', sa.Text(), nullable=False),
    sa.Column('disbursement_tx_hash', sa.Text(), nullable=True),
    sa.Column('failure_code', sa.Text(), nullable=True),
    sa.Column('failure_message', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('requested_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('executed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('locked_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'],
                            name=op.f('fk_charges_organisation_id_organisations')),
    sa.ForeignKeyConstraint(['payment_intent_id'], ['payment_intents.id'],
                            name=op.f('fk_charges_payment_intent_id_payment_intents')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_charges')),
    sa.UniqueConstraint('payment_intent_id', name=op.f('uq_charges_payment_intent_id'))
    )
    op.create_index('ix_charges_pending', 'charges', ['next_attempt_at'], unique=False,
                    postgresql_where=sa.text("status = 'pending'"))
    op.create_table('disbursement_transactions',
    sa.Column('tx_hash', sa.Text(), nullable=False),
    sa.Column('charge_id', sa.Text(), nullable=False),
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('sender', sa.Text(), nullable=False),
    sa.Column('nonce', sa.BigInteger(), nullable=False),
    sa.Column('raw_tx', sa.Text(), nullable=False),
    sa.Column('gas_limit', sa.BigInteger(), nullable=False),
    sa.Column('max_fee_per_gas', sa.Numeric(precision=78, scale=0), nullable=False),
    sa.Column('max_priority_fee_per_gas', sa.Numeric(precision=78, scale=0), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('broadcast_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('block_number', sa.BigInteger(), nullable=True),
    sa.ForeignKeyConstraint(['charge_id'], ['charges.id'],
                            name=op.f('fk_disbursement_transactions_charge_id_charges')),
    sa.PrimaryKeyConstraint('tx_hash', name=op.f('pk_disbursement_transactions'))
    )
    op.create_index(op.f('ix_disbursement_transactions_charge_id'), 'disbursement_transactions',
                    ['charge_id'], unique=False)
    op.create_index(op.f('ix_disbursement_transactions_network_sender_nonce'), 'disbursement_transactions',
                    ['network', 'sender', 'nonce'], unique=False)
    op.create_table('operator_nonces',
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('sender', sa.Text(), nullable=False),
    sa.Column('next_nonce', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('network', 'sender', name=op.f('pk_operator_nonces'))
    )


def downgrade() -> None:
    op.drop_table('operator_nonces')
    op.drop_index(op.f('ix_disbursement_transactions_network_sender_nonce'),
                  table_name='disbursement_transactions')
    op.drop_index(op.f('ix_disbursement_transactions_charge_id'), table_name='disbursement_transactions')
    op.drop_table('disbursement_transactions')
    op.drop_index('ix_charges_pending', table_name='charges', postgresql_where=sa.text("status = 'pending'"))
    op.drop_table('charges')
    op.drop_index(op.f('ix_payment_intents_organisation_id_created_at'), table_name='payment_intents')
    op.drop_index(op.f('ix_payment_intents_status_network_created_at'), table_name='payment_intents')
    op.drop_table('payment_intents')
