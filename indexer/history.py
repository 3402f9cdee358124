"""Where a newly watched address's history comes from (decisions 170-172): `eth_getLogs` over adaptive
ranges (`logs`), or a provider's indexed transfer API (`alchemy_transfers`) whose every answer is
confirmed by `eth_getLogs` on the blocks it names, and whose completeness is checked against the
address's token balances, before anything is stored. Chosen per network by `history_source`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from vip.chain.rpc import RangeTooLargeError, RpcError
from vip.config import NetworkConfig
from vip.indexer.decode import TokenLog
from vip.indexer.fetcher import LogFetcher, Selection, decode_logs

log = structlog.get_logger(__name__)

# Reasons whose history is a wallet's transfers (what a transfer index covers). Other watched addresses
# (a `spender`, whose history is approvals the index does not list) are always scanned.
INDEXED_REASONS = frozenset({"wallet", "counterparty"})
# Named blocks within this many blocks of a range's first are confirmed by that one eth_getLogs range:
# fewer items (a provider bills each), and a wallet's logs in 2,000 blocks stay under any result cap
# (Alchemy has none up to 2,000 blocks). Never wider than a block-range cap the provider stated.
CONFIRM_GAP = 2_000
CONFIRM_MAX_WIDTH = 2_000
BALANCE_OF = "0x70a08231"  # balanceOf(address)


@dataclass(frozen=True)
class HistoryRange:
    """Blocks [start, end] fetched, with every token log of the addresses in them."""

    start: int
    end: int
    logs: list[TokenLog]


class HistorySource(Protocol):
    async def fetch(self, start: int, limit: int, addresses: Sequence[str], reasons: Mapping[str, str],
                    checked_from: int) -> HistoryRange:
        """The logs of `addresses` from `start`, up to at most `limit` (possibly fewer blocks); blocks
        from `checked_from` on are near the head, where a lagging node may lack them: proven complete."""
        ...


class LogScanSource:
    """eth_getLogs over the window in adaptive ranges: one range per call, proven complete as the
    follower's (indexer/completeness.py)."""

    def __init__(self, fetcher: LogFetcher) -> None:
        self.fetcher = fetcher

    async def fetch(self, start: int, limit: int, addresses: Sequence[str], reasons: Mapping[str, str],
                    checked_from: int) -> HistoryRange:
        return await self.fetch_selection(start, limit, addresses, checked_from)

    async def fetch_selection(self, start: int, limit: int, selection: Selection,
                              checked_from: int) -> HistoryRange:
        fetched = await self.fetcher.fetch_range(start - 1, None, limit, checked_from, selection, link=False)
        return HistoryRange(fetched.start, fetched.end, fetched.logs)


def confirm_spans(blocks: Sequence[int], gap: int = CONFIRM_GAP, width: int = CONFIRM_MAX_WIDTH,
                  ) -> list[tuple[int, int]]:
    """Sorted block numbers grouped into small [from, to] ranges covering exactly the blocks named
    (neighbours closer than `gap` share one range of at most `width` blocks)."""
    spans: list[tuple[int, int]] = []
    for number in sorted(set(blocks)):
        if spans and number - spans[-1][1] <= gap and number - spans[-1][0] < width:
            spans[-1] = (spans[-1][0], number)
        else:
            spans.append((number, number))
    return spans


def balance_changes(logs: Sequence[TokenLog], address: str, last: int) -> dict[str, int]:
    """Net token amount into `address` per token by the transfers among `logs` up to block `last`."""
    net: dict[str, int] = {}
    for lg in logs:
        if lg.kind != "transfer" or lg.block_number > last:
            continue
        sign = (lg.party_b == address) - (lg.party_a == address)
        if sign:
            net[lg.token_address] = net.get(lg.token_address, 0) + sign * lg.amount
    return net


class IndexedTransfersSource:
    """Alchemy's `alchemy_getAssetTransfers` (the Transfers API), trusted for nothing: the blocks it
    names are read with address-filtered eth_getLogs and only those logs are returned (what the index
    says and the chain does not show is dropped and logged); then each address's token balances at
    the window's ends must differ by exactly the confirmed transfers, or the index left something out
    and the window is scanned with eth_getLogs instead (`scan`)."""

    def __init__(self, fetcher: LogFetcher, scan: HistorySource, page_size: int = 1_000) -> None:
        self.fetcher = fetcher
        self.rpc = fetcher.rpc
        self.scan = scan
        self.page_size = page_size
        self.tokens = fetcher.tokens
        self.name = fetcher.network.name
        self.scanned: set[str] = set()  # the index failed them (balance check, errors): scanned from now on
        self.log = log.bind(network=self.name, role="backfill", source="alchemy_transfers")

    async def fetch(self, start: int, limit: int, addresses: Sequence[str], reasons: Mapping[str, str],
                    checked_from: int) -> HistoryRange:
        if any(reasons.get(a) not in INDEXED_REASONS or a in self.scanned for a in addresses):
            return await self.scan.fetch(start, limit, addresses, reasons, checked_from)
        named: dict[tuple[str, int], int] = {}  # (tx hash, log index) -> block, as the index says
        try:
            for address in addresses:
                for side in ("fromAddress", "toAddress"):
                    named.update(await self._transfers(start, limit, side, address))
        except RpcError as exc:  # no such method on this plan, or failing past its retries
            self.scanned.update(addresses)
            self.log.warning("transfer index unavailable; scanning logs instead", error=str(exc))
            return await self.scan.fetch(start, limit, addresses, reasons, checked_from)
        logs = await self._confirm(sorted(set(named.values())), addresses)
        on_chain = {(lg.tx_hash, lg.log_index) for lg in logs}
        invented = sorted(key for key in named if key not in on_chain)
        if invented:
            self.log.warning("index named transfers the chain does not have; dropped",
                             count=len(invented), first=f"{invented[0][0]}:{invented[0][1]}")
        if not await self._balances_agree(start, limit, addresses, logs):
            self.scanned.update(addresses)
            self.log.warning("index history fails the balance check; scanning logs instead",
                             addresses=list(addresses), start=start, limit=limit)
            return await self.scan.fetch(start, limit, addresses, reasons, checked_from)
        return HistoryRange(start, limit, logs)

    async def _transfers(self, start: int, limit: int, side: str, address: str,
                         ) -> dict[tuple[str, int], int]:
        query: dict[str, Any] = {
            "fromBlock": hex(start), "toBlock": hex(limit), side: address, "contractAddresses": self.tokens,
            "category": ["erc20"], "withMetadata": False, "excludeZeroValue": False,
            "maxCount": hex(self.page_size), "order": "asc"}
        found: dict[tuple[str, int], int] = {}
        while True:
            page = await self.rpc.call("alchemy_getAssetTransfers", [query])
            for item in page.get("transfers") or []:
                key = _transfer_key(item)
                if key is not None and start <= key[1] <= limit:
                    found[key[0]] = key[1]
            if not page.get("pageKey"):
                return found
            query = {**query, "pageKey": page["pageKey"]}

    async def _confirm(self, blocks: list[int], addresses: Sequence[str]) -> list[TokenLog]:
        """Every token log of the addresses in small ranges around `blocks`, narrower than any block-range
        cap the provider stated (learnt here too, then kept by the sizer for the scan)."""
        width = min(CONFIRM_MAX_WIDTH, self.fetcher.sizer.maximum)
        while True:
            try:
                return await self._logs_of(confirm_spans(blocks, min(CONFIRM_GAP, width - 1), width),
                                           addresses)
            except RangeTooLargeError as exc:
                if width == 1:
                    raise
                if exc.cap and exc.cap < width:
                    self.fetcher.sizer.cap(exc.cap)
                    width = exc.cap
                else:
                    width = max(1, width // 2)

    async def _logs_of(self, spans: list[tuple[int, int]], addresses: Sequence[str]) -> list[TokenLog]:
        """Every token log of the addresses in the spans, several eth_getLogs per HTTP request."""
        calls = [(("eth_getLogs", [{**flt, "fromBlock": hex(a), "toBlock": hex(b)}]), (a, b))
                 for a, b in spans for flt in self.fetcher.filters(addresses)]
        size = self.rpc.config.max_batch_size
        logs: list[TokenLog] = []
        for i in range(0, len(calls), size):
            chunk = calls[i:i + size]
            replies = await self.rpc.batch([c for c, _ in chunk])
            for reply, (_, (a, b)) in zip(replies, chunk, strict=True):
                logs += decode_logs([reply or []], a, b)
        unique = {(lg.tx_hash, lg.log_index): lg for lg in logs}
        return sorted(unique.values(), key=lambda lg: (lg.block_number, lg.log_index))

    async def _balances_agree(self, start: int, limit: int, addresses: Sequence[str],
                              logs: list[TokenLog]) -> bool:
        """Each address's balance of each token at `limit` minus at `start - 1` equals the confirmed
        transfers'. An index that leaves out a transfer changing a balance fails it (decision 171)."""
        calls: list[tuple[str, list[Any]]] = []
        for address in addresses:
            data = BALANCE_OF + address.lower().removeprefix("0x").rjust(64, "0")
            for token in self.tokens:
                calls.append(("eth_call", [{"to": token, "data": data}, hex(limit)]))
                if start > 0:
                    calls.append(("eth_call", [{"to": token, "data": data}, hex(start - 1)]))
        try:
            replies = await self.rpc.batch(calls)
        except RpcError as exc:  # a node without the state of old blocks cannot check: scan instead
            self.log.warning("historical balances unavailable; cannot check the index", error=str(exc))
            return False
        values = iter(int(r or "0x0", 16) for r in replies)
        for address in addresses:
            net = balance_changes(logs, address.lower(), limit)
            for token in self.tokens:
                after = next(values)
                before = next(values) if start > 0 else 0
                if after - before != net.get(token, 0):
                    return False
        return True


def _transfer_key(item: Mapping[str, Any]) -> tuple[tuple[str, int], int] | None:
    """((tx hash, log index), block) from a transfer's `uniqueId` ("<hash>:log:<index>") and
    `blockNum`; None for anything malformed (confirmation finds real logs by their blocks anyway)."""
    try:
        tx_hash, kind, index = str(item["uniqueId"]).split(":")
        if kind != "log":
            return None
        number = int(index, 16) if index.startswith("0x") else int(index)
        return (tx_hash.lower(), number), int(item["blockNum"], 16)
    except (KeyError, TypeError, ValueError):
        return None


def history_source(network: NetworkConfig, fetcher: LogFetcher) -> HistorySource:
    """The network's configured history source (`history_source`)."""
    scan = LogScanSource(fetcher)
    if network.history_source == "alchemy_transfers":
        return IndexedTransfersSource(fetcher, scan)
    return scan
