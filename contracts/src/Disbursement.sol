// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {safeTransferFrom} from "./SafeTokenCall.sol";

/// @notice Pays out approved loans: the operator (the service's hot key) moves stablecoins from a lender's
/// treasury to a borrower, at most once per disbursement intent.
///
/// Tenancy: a treasury never approves this contract. Each organisation has its own spender
/// (`OrganisationSpender`), created by this contract with CREATE2 at an address fixed by the
/// organisation's key (`spenderOf`), and a treasury approves its organisation's spender. `disburse` names
/// the organisation and pulls through that organisation's spender only, so the token's own allowance
/// check refuses to move a treasury that approved another organisation's spender: an approval given for
/// one organisation cannot pay another's intent, whatever the service's database says.
/// Token failures revert with the file-level errors of SafeTokenCall.sol (TokenReverted keeps the token's own
/// revert data, so the service can tell a lender whether the recipient is blacklisted, the token paused,
/// or the treasury short of balance or allowance).
contract Disbursement {
    address public owner;
    address public operator;
    /// @notice Intent ids already paid; an intent can never be paid twice, even if the service retries.
    mapping(bytes32 => bool) public disbursed;

    event Disbursed(
        bytes32 indexed intentId, address indexed token, address indexed from, address to, uint256 amount
    );
    event SpenderCreated(bytes32 indexed organisation, address spender);
    event OperatorChanged(address indexed previous, address indexed current);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    error NotOwner();
    error NotOperator();
    error AlreadyDisbursed(bytes32 intentId);
    error InvalidArgument();

    /// @notice The owner is named rather than taken from msg.sender: a deployment through a CREATE2
    /// factory (the deterministic deployment proxy) would otherwise leave the factory as the owner, and
    /// nobody could ever change the operator.
    constructor(address operator_, address owner_) {
        if (operator_ == address(0) || owner_ == address(0)) revert InvalidArgument();
        owner = owner_;
        operator = operator_;
        emit OwnershipTransferred(address(0), owner_);
        emit OperatorChanged(address(0), operator_);
    }

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner();
        _;
    }

    /// @notice The spender of an organisation (keccak256 of its id), deployed or not: treasuries approve
    /// this address before it has code, and it is created at the organisation's first disbursement.
    function spenderOf(bytes32 organisation) public view returns (address) {
        bytes32 codeHash = keccak256(type(OrganisationSpender).creationCode);
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), organisation,
            codeHash)))));
    }

    /// @notice Move `amount` of `token` from `from` to `to` for intent `intentId` of `organisation`; `from`
    /// must have approved the organisation's spender. Creates the spender first if needed (same
    /// transaction, so a disbursement never waits on a separate deployment).
    function disburse(bytes32 organisation, bytes32 intentId, address token, address from, address to,
                      uint256 amount) external {
        if (msg.sender != operator) revert NotOperator();
        if (amount == 0 || token == address(0) || from == address(0) || to == address(0)) {
            revert InvalidArgument();
        }
        if (disbursed[intentId]) revert AlreadyDisbursed(intentId);
        // Effects before the token call so a re-entrant token cannot replay the same intent.
        disbursed[intentId] = true;
        emit Disbursed(intentId, token, from, to, amount);
        address spender = spenderOf(organisation);
        if (spender.code.length == 0) {
            spender = address(new OrganisationSpender{salt: organisation}());
            emit SpenderCreated(organisation, spender);
        }
        OrganisationSpender(spender).pull(token, from, to, amount);
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

/// @notice One organisation's spender: the address its treasuries approve. Only the Disbursement contract
/// that created it may pull through it (and that contract only on its operator's call), and it can only
/// move what a treasury approved to THIS address.
contract OrganisationSpender {
    address public immutable disbursement;

    error NotDisbursement();

    constructor() {
        disbursement = msg.sender;
    }

    function pull(address token, address from, address to, uint256 amount) external {
        if (msg.sender != disbursement) revert NotDisbursement();
        safeTransferFrom(token, from, to, amount);
    }
}
