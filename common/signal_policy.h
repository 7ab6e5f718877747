// The process-wide signal policy every gpupack binary sets in main, before any thread starts
// (StopSignals' constructor sets it; a main without StopSignals calls InstallSignalPolicy).
//
//  - SIGPIPE is ignored. A write to a peer that has closed its end (an API server restarted
//    mid-request, a scraper gone, kube-scheduler timing out) then fails with EPIPE, an error its
//    caller handles and retries, instead of ending the process with no log line. A per-socket
//    MSG_NOSIGNAL cannot cover it: OpenSSL's socket BIO writes with plain write(2).
//  - A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) writes one line to stderr in the
//    log's format, naming the signal and the binary, then takes its default action (the process
//    dies by that signal, with a core dump where the system keeps them). Under AddressSanitizer
//    the sanitizer's own report is kept instead.
//
// Idempotent; safe to call again from any thread once installed.
#pragma once

namespace gpupack {

void InstallSignalPolicy();

// The name the fatal-signal line gives `signal_number` ("SIGSEGV"); "unknown" for a signal the
// policy does not handle. The whole line reads
//   2026-12-01T10:00:00.000Z ERROR process: gpupack-extender died of fatal signal 11 (SIGSEGV)
const char* FatalSignalName(int signal_number);

}  // namespace gpupack
