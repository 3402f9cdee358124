// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice Shared storage and bookkeeping for the two test stablecoins. The public ERC-20 entry points
/// live in the concrete tokens because they differ exactly where real USDC and USDT differ: return values
/// and the approve rule.
abstract contract StablecoinBase {
    string public name;
    string public symbol;
    uint8 public constant decimals = 6;
    uint256 public totalSupply;
    /// @notice The only account allowed to mint (the dev minter); fixed at deployment.
    address public immutable minter;

    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    error NotMinter();
    error ZeroAddress();
    error InsufficientBalance();
    error InsufficientAllowance();

    constructor(string memory name_, string memory symbol_, address minter_) {
        if (minter_ == address(0)) revert ZeroAddress();
        name = name_;
        symbol = symbol_;
        minter = minter_;
    }

    function mint(address to, uint256 amount) external {
        if (msg.sender != minter) revert NotMinter();
        if (to == address(0)) revert ZeroAddress();
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Transfer(address(0), to, amount);
    }

    function _transfer(address from, address to, uint256 amount) internal {
        if (to == address(0)) revert ZeroAddress();
        uint256 balance = balanceOf[from];
        if (balance < amount) revert InsufficientBalance();
        unchecked {
            balanceOf[from] = balance - amount;
        }
        balanceOf[to] += amount;
        emit Transfer(from, to, amount);
    }

    function _approve(address owner, address spender, uint256 amount) internal {
        if (spender == address(0)) revert ZeroAddress();
        allowance[owner][spender] = amount;
        emit Approval(owner, spender, amount);
    }

    /// @dev Deliberately emits no Approval: like USDC and USDT, transferFrom only emits Transfer, so log
    /// consumers must not expect an allowance update event per pull. A max allowance is never decreased.
    function _spendAllowance(address owner, address spender, uint256 amount) internal {
        uint256 current = allowance[owner][spender];
        if (current == type(uint256).max) return;
        if (current < amount) revert InsufficientAllowance();
        unchecked {
            allowance[owner][spender] = current - amount;
        }
    }
}
