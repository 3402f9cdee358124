// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {StablecoinBase} from "./StablecoinBase.sol";

/// @notice A USDC-like test token: 6 decimals, standard ERC-20 functions that return true.
contract StandardStablecoin is StablecoinBase {
    constructor(string memory name_, string memory symbol_, address minter_)
        StablecoinBase(name_, symbol_, minter_)
    {}

    function transfer(address to, uint256 amount) external returns (bool) {
        _transfer(msg.sender, to, amount);
        return true;
    }

    function approve(address spender, uint256 amount) external returns (bool) {
        _approve(msg.sender, spender, amount);
        return true;
    }

    function transferFrom(address from, address to, uint256 amount) external returns (bool) {
        _spendAllowance(from, msg.sender, amount);
        _transfer(from, to, amount);
        return true;
    }
}
