"""organisations, keys, users, connections, wallets, nonces, oauth states, income records, transfer labels, idempotency, rate limits

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 03:53:45.158748
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('idempotency_keys',
    sa.Column('api_key_id', sa.Text(), nullable=False),
    sa.Column('key', sa.Text(), nullable=False),
    sa.Column('request_hash', sa.Text(), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('response_body', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('api_key_id', 'key', name=op.f('pk_idempotency_keys'))
    )
    op.create_table('organisations',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('default_funding_wallet', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_organisations')),
    sa.UniqueConstraint('name', name=op.f('uq_organisations_name'))
    )
    op.create_table('rate_limit_windows',
    sa.Column('bucket', sa.Text(), nullable=False),
    sa.Column('window_start', sa.DateTime(timezone=True), nullable=False),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('bucket', 'window_start', name=op.f('pk_rate_limit_windows'))
    )
    op.create_table('transfer_labels',
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('tx_hash', sa.Text(), nullable=False),
    sa.Column('log_index', sa.Integer(), nullable=False),
    sa.Column('wallet_address', sa.Text(), nullable=False),
    sa.Column('classification', sa.Text(), nullable=False),
    sa.Column('fraud_flags', postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'"), nullable=False),
    sa.Column('payroll_match', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('labelled_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('network', 'tx_hash', 'log_index', 'wallet_address', name=op.f('pk_transfer_labels'))
    )
    op.create_table('api_keys',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('prefix', sa.Text(), nullable=False),
    sa.Column('secret_hash', sa.Text(), nullable=False),
    sa.Column('scopes', postgresql.ARRAY(sa.Text()), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'], name=op.f('fk_api_keys_organisation_id_organisations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('secret_hash', name=op.f('uq_api_keys_secret_hash'))
    )
    op.create_index(op.f('ix_api_keys_organisation_id'), 'api_keys', ['organisation_id'], unique=False)
    op.create_table('users',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('external_id', sa.Text(), nullable=True),
    sa.Column('metadata', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'], name=op.f('fk_users_organisation_id_organisations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_users'))
    )
    op.create_index(op.f('ix_users_organisation_id_external_id'), 'users', ['organisation_id', 'external_id'], unique=True, postgresql_where=sa.text('external_id IS NOT NULL'))
    op.create_table('connections',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('user_id', sa.Text(), nullable=False),
    sa.Column('type', sa.Text(), nullable=False),
    sa.Column('provider', sa.Text(), nullable=False),
    sa.Column('identifier', sa.Text(), nullable=False),
    sa.Column('network', sa.Text(), nullable=True),
    sa.Column('source_type', sa.Text(), nullable=True),
    sa.Column('account_id', sa.Text(), nullable=True),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_synced_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'], name=op.f('fk_connections_organisation_id_organisations')),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_connections_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_connections'))
    )
    op.create_index(op.f('ix_connections_user_id_created_at'), 'connections', ['user_id', 'created_at'], unique=False)
    op.create_index('uq_connections_active_account', 'connections', ['user_id', 'provider', 'account_id'], unique=True, postgresql_where=sa.text("type = 'platform' AND status = 'active'"))
    op.create_index('uq_connections_active_wallet', 'connections', ['user_id', 'network', 'identifier'], unique=True, postgresql_where=sa.text("type = 'wallet' AND status = 'active'"))
    op.create_table('oauth_states',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('user_id', sa.Text(), nullable=False),
    sa.Column('platform', sa.Text(), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_oauth_states_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_oauth_states'))
    )
    op.create_table('wallet_nonces',
    sa.Column('nonce', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('user_id', sa.Text(), nullable=False),
    sa.Column('issued_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_wallet_nonces_user_id_users')),
    sa.PrimaryKeyConstraint('nonce', name=op.f('pk_wallet_nonces'))
    )
    op.create_table('income_records',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('connection_id', sa.Text(), nullable=False),
    sa.Column('record_date', sa.Date(), nullable=False),
    sa.Column('amount', sa.Numeric(precision=38, scale=6), nullable=False),
    sa.Column('currency', sa.Text(), nullable=False),
    sa.Column('direction', sa.Text(), nullable=False),
    sa.Column('from_reference', sa.Text(), nullable=True),
    sa.Column('description', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['connection_id'], ['connections.id'], name=op.f('fk_income_records_connection_id_connections')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_income_records'))
    )
    op.create_index(op.f('ix_income_records_connection_id_record_date'), 'income_records', ['connection_id', 'record_date'], unique=False)
    op.create_table('wallets',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('user_id', sa.Text(), nullable=False),
    sa.Column('connection_id', sa.Text(), nullable=False),
    sa.Column('address', sa.Text(), nullable=False),
    sa.Column('network', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['connection_id'], ['connections.id'], name=op.f('fk_wallets_connection_id_connections')),
    sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'], name=op.f('fk_wallets_organisation_id_organisations')),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_wallets_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_wallets')),
    sa.UniqueConstraint('connection_id', name=op.f('uq_wallets_connection_id'))
    )
    op.create_index(op.f('ix_wallets_network_address'), 'wallets', ['network', 'address'], unique=False)
    op.create_index(op.f('ix_wallets_user_id_network'), 'wallets', ['user_id', 'network'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_wallets_user_id_network'), table_name='wallets')
    op.drop_index(op.f('ix_wallets_network_address'), table_name='wallets')
    op.drop_table('wallets')
    op.drop_index(op.f('ix_income_records_connection_id_record_date'), table_name='income_records')
    op.drop_table('income_records')
    op.drop_table('wallet_nonces')
    op.drop_table('oauth_states')
    op.drop_index('uq_connections_active_wallet', table_name='connections', postgresql_where=sa.text("type = 'wallet' AND status = 'active'"))
    op.drop_index('uq_connections_active_account', table_name='connections', postgresql_where=sa.text("type = 'platform' AND status = 'active'"))
    op.drop_index(op.f('ix_connections_user_id_created_at'), table_name='connections')
    op.drop_table('connections')
    op.drop_index(op.f('ix_users_organisation_id_external_id'), table_name='users', postgresql_where=sa.text('external_id IS NOT NULL'))
    op.drop_table('users')
    op.drop_index(op.f('ix_api_keys_organisation_id'), table_name='api_keys')
    op.drop_table('api_keys')
    op.drop_table('transfer_labels')
    op.drop_table('rate_limit_windows')
    op.drop_table('organisations')
    op.drop_table('idempotency_keys')
