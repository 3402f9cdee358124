"""Address indexes of token_transfers end with log_index, so a page in (block_number, log_index) order is
read straight from the index.

PostgreSQL 15 was seen sorting a wallet's whole outbound history for one deep page of /v1/transactions
when the index ended at block_number (an incremental sort was costed higher than a full one).

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

OLD = ("block_number",)
NEW = ("block_number", "log_index")


def _swap(columns_from: tuple[str, ...], columns_to: tuple[str, ...]) -> None:
    for side in ("from_address", "to_address"):
        op.drop_index(f"ix_token_transfers_network_{side}_{'_'.join(columns_from)}", table_name="token_transfers")
        op.create_index(f"ix_token_transfers_network_{side}_{'_'.join(columns_to)}", "token_transfers",
                        ["network", side, *columns_to])


def upgrade() -> None:
    _swap(OLD, NEW)


def downgrade() -> None:
    _swap(NEW, OLD)
