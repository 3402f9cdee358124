"""Charge executors: the daemons holding the operator key announce themselves per network (the operator's
public address, never the key), so the API, which holds no key, knows whether a charge will be executed.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'charge_executors',
        sa.Column('instance_id', sa.Text(), nullable=False),
        sa.Column('network', sa.Text(), nullable=False),
        sa.Column('operator_address', sa.Text(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('instance_id', 'network', name=op.f('pk_charge_executors')),
    )
    op.create_index(op.f('ix_charge_executors_network_seen_at'), 'charge_executors', ['network', 'seen_at'])


def downgrade() -> None:
    op.drop_index(op.f('ix_charge_executors_network_seen_at'), table_name='charge_executors')
    op.drop_table('charge_executors')
