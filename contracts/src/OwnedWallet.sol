// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @notice A minimal smart-contract wallet (for tests and local development): one owner key, ERC-1271
/// signatures (a hash signed by the owner is the wallet's signature) and arbitrary calls by the owner.
contract OwnedWallet {
    bytes4 internal constant ERC1271_MAGIC = 0x1626ba7e;
    address public immutable owner;

    error NotOwner();
    error CallFailed(bytes reason);

    constructor(address owner_) {
        owner = owner_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        address signer = ecrecover(hash, v, r, s);
        return signer != address(0) && signer == owner ? ERC1271_MAGIC : bytes4(0xffffffff);
    }

    function execute(address target, bytes calldata data) external returns (bytes memory) {
        if (msg.sender != owner) revert NotOwner();
        (bool ok, bytes memory ret) = target.call(data);
        if (!ok) revert CallFailed(ret);
        return ret;
    }
}
