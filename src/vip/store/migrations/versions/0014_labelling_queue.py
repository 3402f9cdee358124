"""The labelling queue: users whose transfer labels are due to be worked out again, without a VIP.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'labelling_queue',
        sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column('user_id', sa.Text(), nullable=False),
        sa.Column('queued_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('due_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('attempts', sa.Integer(), server_default=sa.text('0'), nullable=False),
        sa.Column('fetch_requested_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_labelling_queue_user_id_users')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_labelling_queue')),
    )
    op.create_index(op.f('ix_labelling_queue_due_at_id'), 'labelling_queue', ['due_at', 'id'])
    op.create_index(op.f('ix_labelling_queue_user_id'), 'labelling_queue', ['user_id'])


def downgrade() -> None:
    op.drop_index(op.f('ix_labelling_queue_user_id'), table_name='labelling_queue')
    op.drop_index(op.f('ix_labelling_queue_due_at_id'), table_name='labelling_queue')
    op.drop_table('labelling_queue')
