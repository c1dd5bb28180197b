/* receipt_cli: `memoryd receipt ...`, for a data subject or an auditor
 * holding a Forget receipt (privacy.proto ForgetReceipt.signed_receipt):
 * verify it offline against the deployment's JWKS and print what it says. */
#ifndef MEMORYD_RECEIPT_CLI_H
#define MEMORYD_RECEIPT_CLI_H

/* argv[0] is "receipt". Returns the process exit status: 0 the receipt
 * verifies, 1 it does not, 2 usage or I/O errors. */
int receipt_cli_main(int argc, char **argv);

#endif
