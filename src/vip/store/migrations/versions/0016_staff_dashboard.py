"""The dashboard: staff members of an organisation (argon2id password hashes, one role each), their
server-side sessions (only a hash of the cookie's token is stored), and the audit log of what staff change.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'staff_members',
        sa.Column('id', sa.Text(), nullable=False),
        sa.Column('organisation_id', sa.Text(), nullable=False),
        sa.Column('email', sa.Text(), nullable=False),
        sa.Column('password_hash', sa.Text(), nullable=False),
        sa.Column('role', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
        sa.CheckConstraint("role IN ('admin', 'analyst', 'operator')", name=op.f('ck_staff_members_role')),
        sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'], name=op.f('fk_staff_members_organisation_id_organisations')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_staff_members')),
        sa.UniqueConstraint('organisation_id', 'email', name=op.f('uq_staff_members_organisation_id_email')),
    )
    op.create_table(
        'staff_sessions',
        sa.Column('token_hash', sa.Text(), nullable=False),
        sa.Column('member_id', sa.Text(), nullable=False),
        sa.Column('csrf_token', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
        sa.Column('last_seen_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['member_id'], ['staff_members.id'], name=op.f('fk_staff_sessions_member_id_staff_members'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('token_hash', name=op.f('pk_staff_sessions')),
    )
    op.create_index(op.f('ix_staff_sessions_member_id'), 'staff_sessions', ['member_id'], unique=False)
    op.create_table(
        'audit_log',
        sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column('organisation_id', sa.Text(), nullable=False),
        sa.Column('member_id', sa.Text(), nullable=True),
        sa.Column('member_email', sa.Text(), nullable=False),
        sa.Column('action', sa.Text(), nullable=False),
        sa.Column('target', sa.Text(), nullable=True),
        sa.Column('details', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
        sa.Column('request_id', sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'], name=op.f('fk_audit_log_organisation_id_organisations')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_log')),
    )
    op.create_index(op.f('ix_audit_log_organisation_id_id'), 'audit_log', ['organisation_id', 'id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_audit_log_organisation_id_id'), table_name='audit_log')
    op.drop_table('audit_log')
    op.drop_index(op.f('ix_staff_sessions_member_id'), table_name='staff_sessions')
    op.drop_table('staff_sessions')
    op.drop_table('staff_members')
