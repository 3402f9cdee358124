// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @dev Only used to build calldata; the declared bool return is not trusted (USDT returns nothing).
interface ITransferFrom {
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
}

error TransferFailed();

/// @notice transferFrom that works with tokens returning bool and with tokens returning nothing.
/// @dev A low-level call to an address without code succeeds silently, so code is required first.
/// Return data must be empty (USDT style) or ABI-decode to true; anything else (false, short or garbage
/// return data) is a failure.
function safeTransferFrom(address token, address from, address to, uint256 amount) {
    if (token.code.length == 0) revert TransferFailed();
    (bool ok, bytes memory ret) = token.call(abi.encodeCall(ITransferFrom.transferFrom, (from, to, amount)));
    if (!ok) revert TransferFailed();
    if (ret.length != 0 && (ret.length < 32 || abi.decode(ret, (uint256)) != 1)) revert TransferFailed();
}
