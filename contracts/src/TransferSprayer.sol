// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {safeTransferFrom} from "./SafeTokenCall.sol";

/// @notice Benchmark helper: one transaction pulls `amountEach` from the caller to every recipient,
/// producing one real token Transfer log per recipient. The caller must approve this contract first.
contract TransferSprayer {
    function spray(address token, address[] calldata recipients, uint256 amountEach) external {
        for (uint256 i = 0; i < recipients.length; ++i) {
            safeTransferFrom(token, msg.sender, recipients[i], amountEach);
        }
    }
}
