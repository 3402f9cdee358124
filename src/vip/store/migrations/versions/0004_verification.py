"""vip reports (the pending row is the generation job) and risk scores

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 06:30:00.000000
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('vip_reports',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('seq', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('user_id', sa.Text(), nullable=False),
    sa.Column('lookback_months', sa.Integer(), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('requested_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('generated_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('fetch_requested_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('error_code', sa.Text(), nullable=True),
    sa.Column('verified_monthly_income', sa.Numeric(precision=38, scale=6), nullable=True),
    sa.Column('report', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('cashflow', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'],
                            name=op.f('fk_vip_reports_organisation_id_organisations')),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_vip_reports_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_vip_reports')),
    sa.UniqueConstraint('seq', name=op.f('uq_vip_reports_seq'))
    )
    op.create_index(op.f('ix_vip_reports_user_id_lookback_months_seq'), 'vip_reports',
                    ['user_id', 'lookback_months', 'seq'], unique=False)
    op.create_index('ix_vip_reports_due', 'vip_reports', ['next_attempt_at'], unique=False,
                    postgresql_where=sa.text("status = 'pending'"))
    op.create_table('risk_scores',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('user_id', sa.Text(), nullable=False),
    sa.Column('vip_id', sa.Text(), nullable=False),
    sa.Column('generated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('score', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'],
                            name=op.f('fk_risk_scores_organisation_id_organisations')),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_risk_scores_user_id_users')),
    sa.ForeignKeyConstraint(['vip_id'], ['vip_reports.id'], name=op.f('fk_risk_scores_vip_id_vip_reports')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_risk_scores')),
    sa.UniqueConstraint('vip_id', name=op.f('uq_risk_scores_vip_id'))
    )


def downgrade() -> None:
    op.drop_table('risk_scores')
    op.drop_index('ix_vip_reports_due', table_name='vip_reports', postgresql_where=sa.text("status = 'pending'"))
    op.drop_index(op.f('ix_vip_reports_user_id_lookback_months_seq'), table_name='vip_reports')
    op.drop_table('vip_reports')
