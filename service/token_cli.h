/* token_cli: `memoryd token ...`, the operator's tool for capability
 * tokens: create signing keys and JWKS files, mint tokens, inspect them. */
#ifndef MEMORYD_TOKEN_CLI_H
#define MEMORYD_TOKEN_CLI_H

/* argv[0] is "token". Returns the process exit status: 0 ok, 1 a token
 * failed verification (inspect), 2 usage or I/O errors. */
int token_cli_main(int argc, char **argv);

#endif
