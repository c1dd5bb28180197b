// ports: loopback port helpers for tests.
#ifndef MEMORYD_TESTS_TESTING_PORTS_H
#define MEMORYD_TESTS_TESTING_PORTS_H

// A loopback TCP port nothing listens on: bound, read back and closed, so
// connecting to it is refused. (Port 1 if no socket could be bound.)
int ClosedPort();
// The same port, for a server the test is about to start on it (the kernel
// rarely hands a just-released port to someone else that quickly).
inline int FreePort() { return ClosedPort(); }

#endif
