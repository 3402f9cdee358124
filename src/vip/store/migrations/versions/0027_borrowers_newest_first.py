"""The dashboard's borrowers list at a lender's scale: an index on the organisation's users in creation
order, so its default page (newest borrowers first) reads its 51 users from the index and looks up only
their latest VIPs, instead of the latest VIP of every borrower then a sort (docs/performance.md, "A
lender's scale").

Revision ID: 0027
Revises: 0026
"""

from alembic import op

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_users_organisation_id_created_at_id', 'users', ['organisation_id', 'created_at', 'id'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_users_organisation_id_created_at_id', table_name='users')
