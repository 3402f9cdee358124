// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {StablecoinBase} from "./StablecoinBase.sol";

/// @notice A test token that behaves like mainnet USDT where it matters to callers: transfer,
/// transferFrom and approve return no data, and an allowance can only be changed via zero.
contract TetherStyleStablecoin is StablecoinBase {
    error ApproveFromNonZero();

    constructor(string memory name_, string memory symbol_, address minter_)
        StablecoinBase(name_, symbol_, minter_)
    {}

    function transfer(address to, uint256 amount) external {
        _transfer(msg.sender, to, amount);
    }

    /// @dev USDT's front-running guard: non-zero -> non-zero is refused, callers must reset to 0 first.
    function approve(address spender, uint256 amount) external {
        if (amount != 0 && allowance[msg.sender][spender] != 0) revert ApproveFromNonZero();
        _approve(msg.sender, spender, amount);
    }

    function transferFrom(address from, address to, uint256 amount) external {
        _spendAllowance(from, msg.sender, amount);
        _transfer(from, to, amount);
    }
}
