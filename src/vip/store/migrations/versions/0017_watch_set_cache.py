"""The live follower's watch-set cache: a partial index on the addresses it has not covered yet (read every
step, a handful of rows among 100,000), and a notification when addresses stop being watched (the
follower then reloads its in-memory set; otherwise it does so periodically). Also a partial index on the
addresses whose backfill is not done, which the backfiller reads at every poll.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


# Once per deleting statement, at commit; the follower also reloads on a timer, so a missed
# notification only keeps a removed address watched a little longer.
NOTIFY_FUNCTION = """
CREATE OR REPLACE FUNCTION watched_addresses_removed_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('vip_watch_set', '');
    RETURN NULL;
END
$$
"""
NOTIFY_TRIGGER = """
CREATE TRIGGER watched_addresses_removed_notify AFTER DELETE ON watched_addresses
FOR EACH STATEMENT EXECUTE FUNCTION watched_addresses_removed_notify()
"""


def upgrade() -> None:
    op.create_index('ix_watched_addresses_not_live', 'watched_addresses', ['network'], unique=False,
                    postgresql_where=sa.text('live_from_block IS NULL'))
    op.create_index('ix_watched_addresses_backfill_pending', 'watched_addresses', ['network'], unique=False,
                    postgresql_where=sa.text('backfill_done_at IS NULL'))
    op.execute(NOTIFY_FUNCTION)
    op.execute(NOTIFY_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS watched_addresses_removed_notify ON watched_addresses")
    op.execute("DROP FUNCTION IF EXISTS watched_addresses_removed_notify()")
    op.drop_index('ix_watched_addresses_backfill_pending', table_name='watched_addresses',
                  postgresql_where=sa.text('backfill_done_at IS NULL'))
    op.drop_index('ix_watched_addresses_not_live', table_name='watched_addresses',
                  postgresql_where=sa.text('live_from_block IS NULL'))
