"""The dashboard's borrowers list sorted by latest VIP, verified income or fraud flags as an index range: each
user's latest VIP (a finished one before a pending one, as the list, the borrower page and GET /v1/vip-report
read it) kept on the user's row by a trigger on `vip_reports`, whatever statement changes a report, and an
index per sort on the organisation's users. The list was the latest VIP of every borrower looked up, then a
sort: 730-2,060 ms at 100,000 borrowers (docs/performance.md, "A lender's scale"; decision 359).

Revision ID: 0028
Revises: 0027
"""

import sqlalchemy as sa
from alembic import op

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None

# The sort keys as the list orders by them (vip.dashboard.borrower_list), a missing VIP below any value. The
# query must spell each expression the same for PostgreSQL to read the index.
SORT_INDEXES = {
    'ix_users_latest_vip_generated_at': "coalesce(latest_vip_generated_at, '0001-01-01 00:00:00+00'::timestamptz)",
    'ix_users_latest_vip_income': "coalesce(latest_vip_income, '-1'::numeric)",
    'ix_users_latest_vip_fraud_flags': "coalesce(latest_vip_fraud_flags, 0)",
}

# Row by row, after any insert, delete or change of what the list shows. The user's row is locked first: a
# concurrent writer of the same user's reports has committed by then, and the UPDATE (a statement of its own,
# so a snapshot of its own under READ COMMITTED) sees its report too; the last to commit writes the truth.
# FOR NO KEY UPDATE (the lock the UPDATE takes anyway), not FOR UPDATE: the latter waits for every
# transaction holding the row's FOR KEY SHARE, which a foreign-key check of any row naming the user (the
# report's own insert among them) holds until commit, so two such writers would each wait for the other.
# A change that leaves the latest VIP as it was (a refresh queued behind a finished VIP, an attempt
# counted) writes no new version of the user's row.
LATEST_FUNCTION = """
CREATE OR REPLACE FUNCTION users_latest_vip() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    uid text := CASE WHEN TG_OP = 'DELETE' THEN OLD.user_id ELSE NEW.user_id END;
BEGIN
    PERFORM 1 FROM users WHERE id = uid FOR NO KEY UPDATE;
    UPDATE users u SET (latest_vip_id, latest_vip_status, latest_vip_generated_at, latest_vip_income,
                        latest_vip_fraud_flags) = (l.id, l.status, l.generated_at, l.income, l.flags)
    FROM (SELECT 1) one LEFT JOIN LATERAL (
        SELECT v.id, v.status, v.generated_at, v.verified_monthly_income AS income,
               coalesce(jsonb_array_length(v.report -> 'fraud_flags'), 0) AS flags
        FROM vip_reports v WHERE v.user_id = uid
        ORDER BY v.status = 'pending', v.seq DESC LIMIT 1) l ON true
    WHERE u.id = uid
      AND (u.latest_vip_id, u.latest_vip_status, u.latest_vip_generated_at, u.latest_vip_income,
           u.latest_vip_fraud_flags) IS DISTINCT FROM (l.id, l.status, l.generated_at, l.income, l.flags);
    RETURN NULL;
END
$$
"""
LATEST_TRIGGER = """
CREATE TRIGGER vip_reports_latest_on_user
AFTER INSERT OR DELETE OR UPDATE OF status, generated_at, verified_monthly_income, report ON vip_reports
FOR EACH ROW EXECUTE FUNCTION users_latest_vip()
"""
BACKFILL = """
UPDATE users u SET (latest_vip_id, latest_vip_status, latest_vip_generated_at, latest_vip_income,
                    latest_vip_fraud_flags) = (
    SELECT v.id, v.status, v.generated_at, v.verified_monthly_income,
           coalesce(jsonb_array_length(v.report -> 'fraud_flags'), 0)
    FROM vip_reports v WHERE v.user_id = u.id
    ORDER BY v.status = 'pending', v.seq DESC LIMIT 1)
WHERE EXISTS (SELECT 1 FROM vip_reports v WHERE v.user_id = u.id)
"""


def upgrade() -> None:
    op.add_column('users', sa.Column('latest_vip_id', sa.Text(), nullable=True))
    op.add_column('users', sa.Column('latest_vip_status', sa.Text(), nullable=True))
    op.add_column('users', sa.Column('latest_vip_generated_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('users', sa.Column('latest_vip_income', sa.Numeric(38, 6), nullable=True))
    op.add_column('users', sa.Column('latest_vip_fraud_flags', sa.Integer(), nullable=True))
    op.execute(LATEST_FUNCTION)
    op.execute(LATEST_TRIGGER)
    op.execute(BACKFILL)
    for name, expression in SORT_INDEXES.items():
        op.create_index(name, 'users', ['organisation_id', sa.text(expression), 'id'], unique=False)


def downgrade() -> None:
    for name in SORT_INDEXES:
        op.drop_index(name, table_name='users')
    op.execute("DROP TRIGGER IF EXISTS vip_reports_latest_on_user ON vip_reports")
    op.execute("DROP FUNCTION IF EXISTS users_latest_vip()")
    for column in ('latest_vip_fraud_flags', 'latest_vip_income', 'latest_vip_generated_at', 'latest_vip_status',
                   'latest_vip_id'):
        op.drop_column('users', column)
