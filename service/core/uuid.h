/* uuid: fresh random identifiers (UUIDv4, RFC 9562 §5.4) for whatever
 * memoryd names itself: token ids, session ids, receipt ids, request ids.
 * From the kernel's CSPRNG (getrandom), so an id is never guessable. */
#ifndef MEMORYD_CORE_UUID_H
#define MEMORYD_CORE_UUID_H

/* The text of a UUID: 36 characters and a NUL. */
#define UUID_TEXT_LEN 37

/* A fresh UUIDv4 in lower-case hex ("8-4-4-4-12") into out. Aborts when
 * the kernel has no entropy to give: an id that could be guessed must never
 * be minted. */
void uuid_new(char out[UUID_TEXT_LEN]);

#endif
