// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {safeTransferFrom} from "./SafeTokenCall.sol";

/// @notice Pays out approved loans: the operator (the service's hot key) moves stablecoins from a
/// treasury that has approved this contract to a borrower, at most once per disbursement intent.
/// Token failures revert with the file-level TransferFailed() error from SafeTokenCall.sol.
contract Disbursement {
    address public owner;
    address public operator;
    /// @notice Intent ids already paid; an intent can never be paid twice, even if the service retries.
    mapping(bytes32 => bool) public disbursed;

    event Disbursed(
        bytes32 indexed intentId, address indexed token, address indexed from, address to, uint256 amount
    );
    event OperatorChanged(address indexed previous, address indexed current);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    error NotOwner();
    error NotOperator();
    error AlreadyDisbursed(bytes32 intentId);
    error InvalidArgument();

    constructor(address operator_) {
        if (operator_ == address(0)) revert InvalidArgument();
        owner = msg.sender;
        operator = operator_;
        emit OwnershipTransferred(address(0), msg.sender);
        emit OperatorChanged(address(0), operator_);
    }

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner();
        _;
    }

    function disburse(bytes32 intentId, address token, address from, address to, uint256 amount) external {
        if (msg.sender != operator) revert NotOperator();
        if (amount == 0 || token == address(0) || from == address(0) || to == address(0)) {
            revert InvalidArgument();
        }
        if (disbursed[intentId]) revert AlreadyDisbursed(intentId);
        // Effects before the token call so a re-entrant token cannot replay the same intent.
        disbursed[intentId] = true;
        emit Disbursed(intentId, token, from, to, amount);
        safeTransferFrom(token, from, to, amount);
    }

    function setOperator(address newOperator) external onlyOwner {
        if (newOperator == address(0)) revert InvalidArgument();
        emit OperatorChanged(operator, newOperator);
        operator = newOperator;
    }

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert InvalidArgument();
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }
}
