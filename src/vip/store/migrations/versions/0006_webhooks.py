"""webhooks: endpoints, deliveries (the delivery jobs), attempts; outbox events record their fan-out

Revision ID: 0006
Revises: 0003
Create Date: 2026-11-22 06:15:00.000000
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


# Wakes idle delivery workers when events commit (a notification is sent at commit, once per transaction);
# they poll as well, so a missed notification only costs latency.
NOTIFY_FUNCTION = """
CREATE OR REPLACE FUNCTION outbox_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('vip_outbox', '');
    RETURN NULL;
END
$$
"""
NOTIFY_TRIGGER = """
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_notify()
"""


def upgrade() -> None:
    op.add_column('outbox_events', sa.Column('fanned_out_at', sa.DateTime(timezone=True), nullable=True))
    # No endpoint existed before this revision: events already stored have nobody to go to.
    op.execute("UPDATE outbox_events SET fanned_out_at = now()")
    op.create_index('ix_outbox_events_not_fanned_out', 'outbox_events', ['seq'], unique=False, postgresql_where=sa.text('fanned_out_at IS NULL'))
    op.create_index('ix_outbox_events_organisation_id_seq', 'outbox_events', ['organisation_id', 'seq'], unique=False)
    op.create_table('webhook_endpoints',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('organisation_id', sa.Text(), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('event_types', postgresql.ARRAY(sa.Text()), nullable=True),
    sa.Column('secret', sa.Text(), nullable=False),
    sa.Column('previous_secret', sa.Text(), nullable=True),
    sa.Column('previous_secret_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'], name=op.f('fk_webhook_endpoints_organisation_id_organisations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_endpoints'))
    )
    op.create_index(op.f('ix_webhook_endpoints_organisation_id'), 'webhook_endpoints', ['organisation_id'], unique=False)
    op.create_table('webhook_deliveries',
    sa.Column('id', sa.Text(), nullable=False),
    sa.Column('event_id', sa.Text(), nullable=False),
    sa.Column('endpoint_id', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('attempts', sa.Integer(), server_default=sa.text('0'), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['endpoint_id'], ['webhook_endpoints.id'], name=op.f('fk_webhook_deliveries_endpoint_id_webhook_endpoints')),
    sa.ForeignKeyConstraint(['event_id'], ['outbox_events.id'], name=op.f('fk_webhook_deliveries_event_id_outbox_events')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries'))
    )
    op.create_index('ix_webhook_deliveries_due', 'webhook_deliveries', ['endpoint_id', 'next_attempt_at'], unique=False, postgresql_where=sa.text("status = 'pending'"))
    op.create_index(op.f('ix_webhook_deliveries_event_id_endpoint_id'), 'webhook_deliveries', ['event_id', 'endpoint_id'], unique=True)
    op.create_table('webhook_attempts',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('delivery_id', sa.Text(), nullable=False),
    sa.Column('attempted_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('duration_ms', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['delivery_id'], ['webhook_deliveries.id'], name=op.f('fk_webhook_attempts_delivery_id_webhook_deliveries')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_attempts'))
    )
    op.create_index(op.f('ix_webhook_attempts_delivery_id_id'), 'webhook_attempts', ['delivery_id', 'id'], unique=False)
    op.execute(NOTIFY_FUNCTION)
    op.execute(NOTIFY_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS outbox_events_notify ON outbox_events")
    op.execute("DROP FUNCTION IF EXISTS outbox_events_notify()")
    op.drop_index(op.f('ix_webhook_attempts_delivery_id_id'), table_name='webhook_attempts')
    op.drop_table('webhook_attempts')
    op.drop_index(op.f('ix_webhook_deliveries_event_id_endpoint_id'), table_name='webhook_deliveries')
    op.drop_index('ix_webhook_deliveries_due', table_name='webhook_deliveries', postgresql_where=sa.text("status = 'pending'"))
    op.drop_table('webhook_deliveries')
    op.drop_index(op.f('ix_webhook_endpoints_organisation_id'), table_name='webhook_endpoints')
    op.drop_table('webhook_endpoints')
    op.drop_index('ix_outbox_events_organisation_id_seq', table_name='outbox_events')
    op.drop_index('ix_outbox_events_not_fanned_out', table_name='outbox_events', postgresql_where=sa.text('fanned_out_at IS NULL'))
    op.drop_column('outbox_events', 'fanned_out_at')
