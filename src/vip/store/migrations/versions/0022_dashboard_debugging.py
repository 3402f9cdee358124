"""What the dashboard needs to help a lender debug and stay safe: every webhook attempt keeps the headers
it was sent with and the start of the receiver's answer (so an integrator sees what their server said,
not only its status), and a staff member given a password by someone else (a first or a reset password)
must replace it at their first sign-in.

Revision ID: 0022
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = '0022'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('webhook_attempts', sa.Column('request_headers', JSONB))
    op.add_column('webhook_attempts', sa.Column('response_body', sa.Text))
    op.add_column('staff_members', sa.Column('must_change_password', sa.Boolean, nullable=False,
                                             server_default=sa.text('false')))


def downgrade() -> None:
    op.drop_column('staff_members', 'must_change_password')
    op.drop_column('webhook_attempts', 'response_body')
    op.drop_column('webhook_attempts', 'request_headers')
