// Test support: a plain TCP connection to a server under test on this machine.
#pragma once

namespace gpupack {

// Opens a blocking TCP connection to 127.0.0.1:`port` with TCP_NODELAY set, as Go's net/http
// (the API server's and kube-scheduler's client) sets it by default. Returns the socket, or -1
// when the connection is refused (the caller decides whether that is a failure).
int ConnectLoopback(int port);

}  // namespace gpupack
