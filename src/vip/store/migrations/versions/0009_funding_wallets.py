"""Funding wallets registered to one organisation with a proof of control, and their single-use nonces.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'funding_wallets',
        sa.Column('address', sa.Text(), nullable=False),
        sa.Column('organisation_id', sa.Text(), nullable=False),
        sa.Column('network', sa.Text(), nullable=False),
        sa.Column('kind', sa.Text(), nullable=False),
        sa.Column('registered_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'],
                                name=op.f('fk_funding_wallets_organisation_id_organisations')),
        sa.PrimaryKeyConstraint('address', name=op.f('pk_funding_wallets')),
    )
    op.create_index(op.f('ix_funding_wallets_organisation_id_registered_at'), 'funding_wallets',
                    ['organisation_id', 'registered_at'])
    op.create_table(
        'funding_wallet_nonces',
        sa.Column('nonce', sa.Text(), nullable=False),
        sa.Column('organisation_id', sa.Text(), nullable=False),
        sa.Column('address', sa.Text(), nullable=False),
        sa.Column('network', sa.Text(), nullable=False),
        sa.Column('message', sa.Text(), nullable=False),
        sa.Column('issued_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'],
                                name=op.f('fk_funding_wallet_nonces_organisation_id_organisations')),
        sa.PrimaryKeyConstraint('nonce', name=op.f('pk_funding_wallet_nonces')),
    )


def downgrade() -> None:
    op.drop_table('funding_wallet_nonces')
    op.drop_index(op.f('ix_funding_wallets_organisation_id_registered_at'), table_name='funding_wallets')
    op.drop_table('funding_wallets')
