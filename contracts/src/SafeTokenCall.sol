// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @dev Only used to build calldata; the declared bool return is not trusted (USDT returns nothing).
interface ITransferFrom {
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
    function balanceOf(address holder) external view returns (uint256);
}

/// @notice The token's transferFrom reverted. `reason` is the token's own revert data, verbatim: an
/// Error(string) such as USDC's "Blacklistable: account is blacklisted" or "Pausable: paused", a custom
/// error, or nothing (USDT's bare `require`). Kept so that the caller can tell a lender why.
error TokenReverted(address token, bytes reason);
/// @notice The token's transferFrom returned something other than nothing or true (false, short or
/// garbage return data): it did not move the tokens.
error TokenRefused(address token, bytes returned);
/// @notice There is no contract at the token address (a call to it would succeed and move nothing).
error TokenHasNoCode(address token);
/// @notice The recipient's balance rose by less than `amount` (`received`): the token kept a fee (USDT can
/// turn one on with setParams). A loan is paid in full or not at all, so the whole pull is undone.
error TokenShortDelivery(address token, uint256 expected, uint256 received);

/// @notice transferFrom that works with tokens returning bool and with tokens returning nothing, and that
/// delivers exactly `amount` to `to`.
/// @dev A low-level call to an address without code succeeds silently, so code is required first.
/// Return data must be empty (USDT style) or ABI-decode to true; anything else is a failure. The
/// recipient's balance is read before and after: a token that takes a fee on transfer is refused.
function safeTransferFrom(address token, address from, address to, uint256 amount) {
    if (token.code.length == 0) revert TokenHasNoCode(token);
    uint256 before = ITransferFrom(token).balanceOf(to);
    (bool ok, bytes memory ret) = token.call(abi.encodeCall(ITransferFrom.transferFrom, (from, to, amount)));
    if (!ok) revert TokenReverted(token, ret);
    if (ret.length != 0 && (ret.length < 32 || abi.decode(ret, (uint256)) != 1)) revert TokenRefused(token, ret);
    uint256 received = ITransferFrom(token).balanceOf(to) - before;
    if (from != to && received != amount) revert TokenShortDelivery(token, amount, received);
}
