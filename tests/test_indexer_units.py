"""Pure indexer logic: range sizing, reorg arithmetic, throttling, progress output, log decoding."""

from __future__ import annotations

import io
import random

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from vip.chain.contracts import APPROVAL_TOPIC, TRANSFER_TOPIC
from vip.chain.range_errors import block_range_cap, is_range_too_large, suggested_range_size
from vip.chain.throttle import backoff_delay
from vip.indexer.decode import BlockHeader, address_topic, parse_header, parse_token_log, parse_token_logs
from vip.indexer.fetcher import InconsistentResponse, decode_logs
from vip.indexer.progress import Progress, format_progress
from vip.indexer.ranges import AdaptiveRange, finalized_block, next_range
from vip.indexer.reorg import broken_link, first_common_block, header_window_start, headers_needed


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- ranges: provider error messages ------------------------------------------------------------------

INFURA_MSG = "query returned more than 10000 results. Try with this block range [0x1E2A3B, 0x1E2AD5]."
ALCHEMY_MSG = (
    "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no "
    "limit on the response size, or you can request any block range with a cap of 10K logs in the "
    "response. Based on your parameters, this block range should work: [0x1e2a3b, 0x1e2ad5]"
)
MAX_RANGE_MSG = "exceed maximum block range: 2000"
NO_HINT_MSG = "query returned more than 10000 results"


def test_suggested_range_size_from_infura_hex_brackets():
    assert suggested_range_size(INFURA_MSG, 0x1E2A3B) == 0x1E2AD5 - 0x1E2A3B + 1


def test_suggested_range_size_from_alchemy_message():
    # The "2K block range" / "10K logs" prose must not be mistaken for the hint.
    assert suggested_range_size(ALCHEMY_MSG, 0x1E2A3B) == 0x1E2AD5 - 0x1E2A3B + 1


def test_suggested_range_size_keeps_only_the_width_of_the_hint():
    # The provider's bracket may start elsewhere than our from_block; only its width matters.
    assert suggested_range_size("Try with this block range [100, 199].", 5000) == 100


def test_suggested_range_size_decimal_brackets():
    assert suggested_range_size("query returned more than 10000 results, try [1000, 1499]", 1000) == 500


def test_suggested_range_size_from_maximum_range():
    assert suggested_range_size(MAX_RANGE_MSG, 123) == 2000


@pytest.mark.parametrize(("message", "cap"), [
    ("eth_getLogs is limited to a 10,000 range", 10_000),  # QuickNode
    ("eth_getLogs is limited to 1024 block range. Please check the parameter requirements", 1024),  # BlockPI
    ("eth_getLogs range is too large, max is 1k blocks", 1000),  # "1k" is a thousand, not one
    ("query exceeds max block range 100000", 100_000),
    (MAX_RANGE_MSG, 2000),
])
def test_block_range_cap_stated_by_the_refusal(message, cap):
    assert is_range_too_large(message)
    assert block_range_cap(message) == cap
    assert suggested_range_size(message, 0) == cap


@pytest.mark.parametrize("message", [INFURA_MSG, ALCHEMY_MSG, NO_HINT_MSG])
def test_result_cap_refusals_state_no_block_range_cap(message):
    # Alchemy's "up to a 2K block range" prose is no cap: any range under 10K logs is accepted.
    assert block_range_cap(message) is None


def test_suggested_range_from_a_dash_range():
    message = "query exceeds max results 20000, retry with the range 23879634-23879696"
    assert is_range_too_large(message)
    assert suggested_range_size(message, 23879634) == 63
    assert block_range_cap(message) is None


@pytest.mark.parametrize("message", [NO_HINT_MSG, "Log response size exceeded.", "execution reverted"])
def test_suggested_range_size_none_without_hint(message):
    assert suggested_range_size(message, 0) is None


@pytest.mark.parametrize("message", [INFURA_MSG, ALCHEMY_MSG, MAX_RANGE_MSG, NO_HINT_MSG])
def test_is_range_too_large_for_provider_refusals(message):
    assert is_range_too_large(message)


@pytest.mark.parametrize(
    "message",
    [
        "block range extends beyond current head block",
        "execution reverted",
        "header not found",
        "method not found",
        "invalid argument 0: hex string has length 3, want 40 for common.Address",
    ],
)
def test_is_range_too_large_false_for_other_errors(message):
    assert not is_range_too_large(message)


# --- ranges: next_range ----------------------------------------------------------------------------------


def test_next_range_starts_after_cursor_and_caps_at_size():
    assert next_range(cursor=99, head=1000, size=50) == (100, 149)


def test_next_range_never_passes_head():
    assert next_range(cursor=99, head=120, size=50) == (100, 120)


def test_next_range_single_block():
    assert next_range(cursor=99, head=100, size=50) == (100, 100)


@pytest.mark.parametrize(("cursor", "head"), [(100, 100), (150, 100)])
def test_next_range_none_when_caught_up(cursor, head):
    assert next_range(cursor, head, 10) is None


@given(
    cursor=st.integers(min_value=-1, max_value=1000),
    span=st.integers(min_value=0, max_value=300),
    sizes=st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=20),
)
def test_next_range_tiles_cursor_to_head(cursor, span, sizes):
    head = cursor + span
    covered: list[int] = []
    position = cursor
    for i in range(10_000):
        size = sizes[i % len(sizes)]
        rng = next_range(position, head, size)
        if rng is None:
            break
        start, end = rng
        assert start == position + 1
        assert start <= end <= head
        assert end - start + 1 <= size
        covered.extend(range(start, end + 1))
        position = end
    else:
        pytest.fail("next_range never reported caught up")
    assert covered == list(range(cursor + 1, head + 1))


# --- ranges: AdaptiveRange -------------------------------------------------------------------------------


def test_adaptive_range_halves_on_failure_down_to_minimum():
    sizer = AdaptiveRange(size=100, maximum=1000, minimum=10)
    sizes = []
    for _ in range(6):
        sizer.failed()
        sizes.append(sizer.size)
    assert sizes == [50, 25, 12, 10, 10, 10]


def test_adaptive_range_grows_after_success_up_to_maximum():
    sizer = AdaptiveRange(size=100, maximum=1000)
    previous = sizer.size
    for _ in range(20):
        sizer.succeeded(logs_returned=0, target_logs=1000)
        assert sizer.size > previous or sizer.size == 1000
        previous = sizer.size
    assert sizer.size == 1000


def test_adaptive_range_grows_from_size_one():
    sizer = AdaptiveRange(size=1, maximum=10, growth=1.5)
    sizer.succeeded(logs_returned=0, target_logs=100)
    assert sizer.size >= 2


@pytest.mark.parametrize("logs_returned", [500, 501, 999, 1000, 5000])
def test_adaptive_range_does_not_grow_with_half_target_logs(logs_returned):
    sizer = AdaptiveRange(size=100, maximum=1000)
    sizer.succeeded(logs_returned=logs_returned, target_logs=1000)
    assert sizer.size == 100


def test_adaptive_range_grows_just_below_half_target_logs():
    sizer = AdaptiveRange(size=100, maximum=1000)
    sizer.succeeded(logs_returned=499, target_logs=1000)
    assert sizer.size > 100


@pytest.mark.parametrize(
    ("hint", "expected"), [(500, 500), (5, 10), (10**9, 1000), (0, 10), (10, 10), (1000, 1000)]
)
def test_adaptive_range_suggest_clamps(hint, expected):
    sizer = AdaptiveRange(size=100, maximum=1000, minimum=10)
    sizer.suggest(hint)
    assert sizer.size == expected


def test_adaptive_range_cap_is_kept_while_a_suggestion_is_grown_from():
    sizer = AdaptiveRange(size=100_000, maximum=10_000_000)
    sizer.cap(10_000)
    assert (sizer.size, sizer.maximum) == (10_000, 10_000)
    for _ in range(5):
        sizer.succeeded(logs_returned=0, target_logs=1000)
    assert sizer.size == 10_000  # never past the provider's cap again
    sizer.suggest(300)  # a result-sized width: taken now ...
    sizer.succeeded(logs_returned=0, target_logs=1000)
    assert sizer.size == 600  # ... and grown from


def test_adaptive_range_initial_size_clamped():
    assert AdaptiveRange(size=5000, maximum=2000).size == 2000
    assert AdaptiveRange(size=0, maximum=2000, minimum=3).size == 3


def test_finalized_block():
    assert finalized_block(head=1000, finality_depth=65) == 935
    assert finalized_block(head=1000, finality_depth=0) == 1000


# --- reorg -----------------------------------------------------------------------------------------------


def header(number: int, hash_: str, parent: str = "0xparent", ts: int = 0) -> BlockHeader:
    return BlockHeader(number=number, hash=hash_, parent_hash=parent, timestamp=ts)


def test_first_common_block_finds_newest_match():
    stored = [(10, "0xa10"), (9, "0xa9"), (8, "0xa8"), (7, "0xa7")]
    canonical = [header(10, "0xb10"), header(9, "0xb9"), header(8, "0xa8"), header(7, "0xa7")]
    assert first_common_block(stored, canonical) == (8, "0xa8")


def test_first_common_block_newest_when_all_match():
    stored = [(10, "0xa10"), (9, "0xa9")]
    assert first_common_block(stored, [header(10, "0xa10"), header(9, "0xa9")]) == (10, "0xa10")


def test_first_common_block_none_when_no_match():
    stored = [(10, "0xa10"), (9, "0xa9")]
    assert first_common_block(stored, [header(10, "0xb10"), header(9, "0xb9")]) is None


def test_first_common_block_skips_missing_node_headers():
    stored = [(10, "0xa10"), (9, "0xa9"), (8, "0xa8")]
    assert first_common_block(stored, [None, None, header(8, "0xa8")]) == (8, "0xa8")
    assert first_common_block(stored, [None, None, None]) is None


def test_first_common_block_requires_same_number():
    # A header for another height with the same hash is not agreement about this height.
    assert first_common_block([(10, "0xa10")], [header(11, "0xa10")]) is None


def test_broken_link_none_for_one_chain():
    chain = [header(5, "0x5", "0x4"), header(6, "0x6", "0x5"), header(7, "0x7", "0x6")]
    assert broken_link(chain) is None


def test_broken_link_first_mismatch():
    chain = [header(5, "0x5", "0x4"), header(6, "0x6", "0x5"), header(7, "0x7", "0xother"),
             header(8, "0x8", "0xalso-other")]
    assert broken_link(chain) == 7


def test_broken_link_empty_and_single():
    assert broken_link([]) is None
    assert broken_link([header(1, "0x1", "0x0")]) is None


@given(
    start=st.integers(min_value=0, max_value=60),
    length=st.integers(min_value=0, max_value=40),
    finalized=st.integers(min_value=-5, max_value=120),
    data=st.data(),
)
def test_headers_needed(start, length, finalized, data):
    end = start + length
    log_blocks = data.draw(st.sets(st.integers(min_value=start, max_value=end), max_size=10))
    needed = headers_needed(start, end, finalized, log_blocks)
    assert needed == sorted(set(needed)), "sorted, without duplicates"
    for n in range(start - 10, end + 11):
        expected = n in (start, end) or n in log_blocks or (start <= n <= end and n >= finalized)
        assert (n in needed) == expected, n
    assert all(start <= n <= end for n in needed)


def test_headers_needed_example():
    # Range 10..20, finalized 17: both ends, 17..20, and the log blocks 12 and 14.
    assert headers_needed(10, 20, 17, {12, 14}) == [10, 12, 14, 17, 18, 19, 20]


def test_header_window_start():
    # The finalized block (head - depth) when the cursor is above it ...
    assert header_window_start(cursor=1000, finalized=935) == 935
    # ... but never above the cursor (during an initial sync far behind the head).
    assert header_window_start(cursor=100, finalized=935) == 100


# --- backoff ---------------------------------------------------------------------------------------------


def test_backoff_delay_bounds():
    rng = random.Random(1234)
    for attempt in range(12):
        ceiling = min(5.0, 0.2 * 2**attempt)
        delays = [backoff_delay(attempt, base=0.2, cap=5.0, rng=rng) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        # Full jitter: spread over the interval, not pinned to one end.
        assert max(delays) > ceiling / 2
        assert min(delays) < ceiling / 2


def test_backoff_delay_deterministic_with_seed():
    a = [backoff_delay(n, 0.1, 10.0, random.Random(7)) for n in range(5)]
    b = [backoff_delay(n, 0.1, 10.0, random.Random(7)) for n in range(5)]
    assert a == b


# --- progress --------------------------------------------------------------------------------------------


def test_format_progress():
    line = format_progress("ethereum sync", done=12_000, total=48_000, elapsed_s=4.0)
    assert line.startswith("ethereum sync")
    assert "12,000/48,000" in line
    assert "25.0%" in line
    assert "3,000 blocks/s" in line
    # 36,000 blocks left at 3,000 blocks/s
    assert "ETA 0:00:12" in line


def test_format_progress_long_eta():
    line = format_progress("polygon backfill", done=100, total=360_100, elapsed_s=1.0)
    assert "100 blocks/s" in line
    assert "ETA 1:00:00" in line


def test_format_progress_without_elapsed_time():
    line = format_progress("x", done=0, total=10, elapsed_s=0.0)
    assert "0/10" in line
    assert "0.0%" in line
    assert "ETA ?" in line


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_non_tty_logs_instead_of_writing():
    clock = FakeClock()
    stream = io.StringIO()
    progress = Progress("sync", total=100, stream=stream, every_s=1.0, clock=clock)
    with structlog.testing.capture_logs() as logs:
        clock.now += 2
        progress.advance(50)
        clock.now += 2
        progress.advance(50)
    assert stream.getvalue() == ""
    assert [entry["done"] for entry in logs if entry["event"] == "progress"] == [50, 100]


def test_progress_tty_rate_limited_and_final_newline():
    clock = FakeClock()
    stream = TtyStream()
    progress = Progress("sync", total=100, stream=stream, every_s=2.0, clock=clock)

    clock.now += 0.5
    progress.advance(10)
    clock.now += 1.0
    progress.advance(10)
    assert stream.getvalue() == "", "nothing before every_s has passed"

    clock.now += 0.5  # 2.0 s since start
    progress.advance(10)
    first = stream.getvalue()
    assert first.startswith("\r")
    assert "30/100" in first
    assert not first.endswith("\n")

    clock.now += 1.9
    progress.advance(10)
    assert stream.getvalue() == first, "second report must wait every_s after the first"

    clock.now += 0.1
    progress.advance(10)
    second = stream.getvalue()[len(first):]
    assert second.startswith("\r") and "50/100" in second and "\n" not in second

    clock.now += 0.1  # well within every_s, but the scan is done: report at once, end the line
    progress.advance(50)
    final = stream.getvalue()[len(first) + len(second):]
    assert final.startswith("\r")
    assert "100/100" in final and "100.0%" in final
    assert final.endswith("\n")
    assert stream.getvalue().count("\n") == 1


def test_progress_done_never_exceeds_total():
    clock = FakeClock()
    stream = TtyStream()
    progress = Progress("sync", total=10, stream=stream, clock=clock)
    progress.advance(25)
    assert progress.done == 10
    assert "10/10" in stream.getvalue()


# --- decode ----------------------------------------------------------------------------------------------

TOKEN = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"
ALICE = "0x8Ba1f109551bD432803012645Ac136ddd64DBA72"
BOB = "0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B"
BLOCK_HASH = "0x" + "Ab" * 32
TX_HASH = "0x" + "Cd" * 32


def padded(address: str) -> str:
    return "0x" + "0" * 24 + address[2:]


def raw_log(**overrides) -> dict:
    log = {
        "address": TOKEN,
        "topics": [TRANSFER_TOPIC, padded(ALICE), padded(BOB)],
        "data": "0x" + (1_234_567).to_bytes(32, "big").hex(),
        "blockNumber": hex(19_000_123),
        "blockHash": BLOCK_HASH,
        "transactionHash": TX_HASH,
        "transactionIndex": "0x5",
        "logIndex": "0x1a",
        "removed": False,
    }
    log.update(overrides)
    return log


def test_topic_constants_are_the_erc20_event_signatures():
    assert TRANSFER_TOPIC == "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
    assert APPROVAL_TOPIC == "0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925"


def test_parse_transfer_log():
    parsed = parse_token_log(raw_log(blockTimestamp=hex(1_700_000_000)))
    assert parsed is not None
    assert parsed.kind == "transfer"
    assert parsed.token_address == TOKEN.lower()
    assert parsed.party_a == ALICE.lower()
    assert parsed.party_b == BOB.lower()
    assert parsed.amount == 1_234_567
    assert parsed.block_number == 19_000_123
    assert parsed.block_hash == BLOCK_HASH.lower()
    assert parsed.tx_hash == TX_HASH.lower()
    assert parsed.log_index == 26
    assert parsed.block_timestamp == 1_700_000_000


def test_parse_log_without_timestamp():
    parsed = parse_token_log(raw_log())
    assert parsed is not None and parsed.block_timestamp is None


def test_parse_log_max_uint256_exact():
    parsed = parse_token_log(raw_log(data="0x" + "f" * 64))
    assert parsed is not None
    assert parsed.amount == 2**256 - 1
    assert isinstance(parsed.amount, int)


def test_parse_log_zero_amount():
    parsed = parse_token_log(raw_log(data="0x" + "0" * 64))
    assert parsed is not None and parsed.amount == 0


def test_parse_log_upper_case_topic0():
    parsed = parse_token_log(raw_log(topics=[TRANSFER_TOPIC.upper().replace("0X", "0x"),
                                              padded(ALICE), padded(BOB)]))
    assert parsed is not None and parsed.kind == "transfer"


def test_parse_approval_log_maps_owner_and_spender():
    parsed = parse_token_log(raw_log(topics=[APPROVAL_TOPIC, padded(ALICE), padded(BOB)]))
    assert parsed is not None
    assert parsed.kind == "approval"
    assert parsed.party_a == ALICE.lower()  # owner
    assert parsed.party_b == BOB.lower()  # spender


def test_parse_log_other_topic():
    other = "0x" + "12" * 32
    assert parse_token_log(raw_log(topics=[other, padded(ALICE), padded(BOB)])) is None


def test_parse_log_removed():
    assert parse_token_log(raw_log(removed=True)) is None


@pytest.mark.parametrize("data", ["0x", "0x" + "00" * 31, "0x" + "00" * 33, "0x" + "00" * 64])
def test_parse_log_wrong_data_length(data):
    assert parse_token_log(raw_log(data=data)) is None


@pytest.mark.parametrize(
    "topics",
    [
        [],  # anonymous event
        [TRANSFER_TOPIC],
        [TRANSFER_TOPIC, padded(ALICE)],
        # ERC-721 Transfer: same signature, token id indexed as a fourth topic, no data.
        [TRANSFER_TOPIC, padded(ALICE), padded(BOB), "0x" + "00" * 31 + "07"],
    ],
)
def test_parse_log_non_erc20_topic_layouts(topics):
    data = "0x" if len(topics) == 4 else "0x" + "00" * 32
    assert parse_token_log(raw_log(topics=topics, data=data)) is None


@pytest.mark.parametrize("address", [ALICE, BOB.lower(), "0x" + "0" * 40, "0x" + "f" * 40])
def test_address_topic_round_trips(address):
    topic = address_topic(address)
    assert len(topic) == 66 and topic.startswith("0x")
    assert int(topic, 16) == int(address, 16)
    parsed = parse_token_log(raw_log(topics=[TRANSFER_TOPIC, topic, address_topic(BOB)]))
    assert parsed is not None
    assert parsed.party_a == address.lower()
    assert parsed.party_b == BOB.lower()


def test_parse_header():
    block = {
        "number": hex(19_000_123),
        "hash": BLOCK_HASH,
        "parentHash": "0x" + "EF" * 32,
        "timestamp": hex(1_700_000_012),
        "miner": "0x" + "00" * 20,
        "transactions": [],
    }
    parsed = parse_header(block)
    assert parsed == BlockHeader(
        number=19_000_123, hash=BLOCK_HASH.lower(), parent_hash="0x" + "ef" * 32, timestamp=1_700_000_012
    )
    assert parsed.time.isoformat() == "2023-11-14T22:13:32+00:00"


@pytest.mark.parametrize("message", [
    "rate limit exceeded",
    "Too many requests, please slow down",
    "Your app has exceeded its compute units per second capacity.",
])
def test_rate_limit_messages_throttle_rather_than_shrink_the_range(message):
    from vip.chain.rpc import RateLimitedError, _classify

    error = _classify("eth_getLogs", [{"fromBlock": "0x1"}], {"code": -32005, "message": message})
    assert isinstance(error, RateLimitedError)


def test_too_many_results_still_shrinks_the_range():
    from vip.chain.rpc import RangeTooLargeError, _classify

    error = _classify("eth_getLogs", [{"fromBlock": "0x10"}], {
        "code": -32005, "message": "query returned more than 10000 results. Try with this block range "
                                   "[0x10, 0x1f]."})
    assert isinstance(error, RangeTooLargeError) and error.suggested_size == 16


# --- decode_logs: answers as a node sends them, and as a broken one might ------------------------------

def _raw_log(block: int, tx: int, index: int) -> dict:
    return {"address": "0x" + "ab" * 20, "topics": [TRANSFER_TOPIC, address_topic("0x" + "01" * 20),
                                                   address_topic("0x" + "02" * 20)],
            "data": "0x" + f"{block * 1000 + index:064x}", "blockNumber": hex(block),
            "blockHash": "0x" + f"{block:064x}", "transactionHash": "0x" + f"{tx:064x}",
            "logIndex": hex(index), "blockTimestamp": hex(1_700_000_000 + block)}


def _reference_decode(batches: list[list[dict]]) -> list:
    """What decode_logs gives by definition: every log once per (transaction, log index), the last
    answer's copy kept, in chain order."""
    seen = {}
    for raw in batches:
        for parsed in map(parse_token_log, raw):
            if parsed is not None:
                seen[(parsed.tx_hash, parsed.log_index)] = parsed
    return sorted(seen.values(), key=lambda lg: (lg.block_number, lg.log_index))


@given(st.lists(st.tuples(st.integers(10, 14), st.integers(0, 5), st.integers(0, 6)), max_size=40),
       st.integers(1, 3), st.randoms(use_true_random=False), st.booleans())
def test_decode_logs_dedups_and_orders_whatever_the_answers(entries, parts, rnd, in_order):
    raw = [_raw_log(b, tx, i) for b, tx, i in entries]
    if in_order:
        raw.sort(key=lambda r: (int(r["blockNumber"], 16), int(r["logIndex"], 16)))
    else:
        rnd.shuffle(raw)
    cuts = sorted(rnd.randint(0, len(raw)) for _ in range(parts - 1))
    batches = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert decode_logs(batches, 10, 14) == _reference_decode(batches)


def test_decode_logs_keeps_one_of_a_transaction_repeated_across_blocks():
    # Strictly rising (block, log index), yet the same (transaction, log index) twice: one is kept.
    raw = [_raw_log(10, 1, 0), _raw_log(10, 1, 1), _raw_log(11, 1, 1), _raw_log(11, 2, 2)]
    decoded = decode_logs([raw], 10, 14)
    assert decoded == _reference_decode([raw])
    assert [(lg.block_number, lg.log_index) for lg in decoded] == [(10, 0), (11, 1), (11, 2)]


def test_decode_logs_refuses_a_log_outside_the_range():
    with pytest.raises(InconsistentResponse):
        decode_logs([[_raw_log(10, 1, 0), _raw_log(15, 2, 0)]], 10, 14)


_HEX = st.text("0123456789abcdefABCDEF", min_size=1, max_size=3)


@st.composite
def _answer_log(draw) -> dict:
    """An eth_getLogs item, mostly a token log, sometimes one parse_token_log leaves out."""
    def hex_text(digits: int) -> str:
        return "0x" + draw(st.text("0123456789abcdefABCDEF", min_size=digits, max_size=digits))
    topic0 = draw(st.sampled_from([TRANSFER_TOPIC, APPROVAL_TOPIC, TRANSFER_TOPIC.upper().replace("0X", "0x"),
                                   "0x" + "11" * 32]))
    topics = [topic0, "0x" + "0" * 24 + draw(st.sampled_from(["ab" * 20, "AB" * 20, "0c" * 20])),
              "0x" + "0" * 24 + draw(st.sampled_from(["cd" * 20, "Cd" * 20]))]
    topics = topics[:draw(st.sampled_from([3, 3, 3, 2]))]
    item = {"address": draw(st.sampled_from(["0x" + "Ee" * 20, "0x" + "ee" * 20])), "topics": topics,
            "data": draw(st.sampled_from([hex_text(64), hex_text(64), hex_text(10), "0x"])),
            "blockNumber": "0x" + draw(_HEX),
            "blockHash": draw(st.sampled_from(["0x" + "Aa" * 32, "0x" + "bb" * 32])),
            "transactionHash": draw(st.sampled_from(["0x" + "Cc" * 32, "0x" + "dd" * 32])),
            "logIndex": "0x" + draw(_HEX)}
    if draw(st.booleans()):
        item["blockTimestamp"] = "0x" + draw(_HEX)
    if draw(st.integers(0, 9)) == 0:
        item["removed"] = True
    return item


@given(st.lists(_answer_log(), max_size=30))
def test_parse_token_logs_is_parse_token_log_over_an_answer(raw):
    assert parse_token_logs(raw) == [lg for lg in map(parse_token_log, raw) if lg is not None]
