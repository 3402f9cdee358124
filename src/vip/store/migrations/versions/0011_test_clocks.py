"""Test clocks: a frozen time that users created on it are verified at (development stacks only).

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'test_clocks',
        sa.Column('id', sa.Text(), nullable=False),
        sa.Column('organisation_id', sa.Text(), nullable=False),
        sa.Column('name', sa.Text(), nullable=True),
        sa.Column('frozen_time', sa.DateTime(timezone=True), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'],
                                name=op.f('fk_test_clocks_organisation_id_organisations')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_test_clocks')),
    )
    op.add_column('users', sa.Column('test_clock_id', sa.Text(), nullable=True))
    op.create_foreign_key(op.f('fk_users_test_clock_id_test_clocks'), 'users', 'test_clocks',
                          ['test_clock_id'], ['id'])


def downgrade() -> None:
    op.drop_constraint(op.f('fk_users_test_clock_id_test_clocks'), 'users', type_='foreignkey')
    op.drop_column('users', 'test_clock_id')
    op.drop_table('test_clocks')
