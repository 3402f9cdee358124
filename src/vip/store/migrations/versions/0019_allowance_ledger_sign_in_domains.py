"""The allowance ledger and organisations' sign-in domains.

payment_intents.approval_amount: the total allowance an intent's approval instructions ask for (every
open intent of the same funding wallet, token and spender plus this one; null on older rows, whose
instructions asked for the intent's own amount). payment_intents.approval_coverage: how a confirmed
intent is covered, `approval` or `standing_allowance`; payment_intents.created_block: the node's latest
block when the intent was created (null when the node did not answer), which tells the two apart.

sign_in_domains: the sites an organisation's borrowers sign in on (EIP-4361 `domain`, with the URI
prefixes a message may name there).

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('payment_intents', sa.Column('approval_amount', sa.Numeric(78, 0), nullable=True))
    op.add_column('payment_intents', sa.Column('approval_coverage', sa.Text(), nullable=True))
    op.add_column('payment_intents', sa.Column('created_block', sa.BigInteger(), nullable=True))
    op.create_table(
        'sign_in_domains',
        sa.Column('organisation_id', sa.Text(), nullable=False),
        sa.Column('domain', sa.Text(), nullable=False),
        sa.Column('uri_prefixes', postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['organisation_id'], ['organisations.id'],
                                name=op.f('fk_sign_in_domains_organisation_id_organisations')),
        sa.PrimaryKeyConstraint('organisation_id', 'domain', name=op.f('pk_sign_in_domains')),
    )


def downgrade() -> None:
    op.drop_table('sign_in_domains')
    op.drop_column('payment_intents', 'created_block')
    op.drop_column('payment_intents', 'approval_coverage')
    op.drop_column('payment_intents', 'approval_amount')
