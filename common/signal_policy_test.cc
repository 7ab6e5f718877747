#include "common/signal_policy.h"

#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/stop_signals.h"

namespace gpupack {
namespace {

// The API-server-restart failure in miniature: the peer closes its end, then we write. Without
// the policy the write raises SIGPIPE and the test binary dies with it; with it, EPIPE.
void ExpectWriteAfterPeerCloseIsEpipe(int writer, int peer) {
  InstallSignalPolicy();
  close(peer);
  errno = 0;
  EXPECT_EQ(write(writer, "x", 1), -1);
  EXPECT_EQ(errno, EPIPE);
  close(writer);
}

TEST(SignalPolicy, AWriteToAClosedPipeIsEpipeNotDeath) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ExpectWriteAfterPeerCloseIsEpipe(fds[1], fds[0]);
}

// The same through a socket with plain write(2), as OpenSSL's socket BIO writes.
TEST(SignalPolicy, AWriteToAClosedSocketIsEpipeNotDeath) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ExpectWriteAfterPeerCloseIsEpipe(fds[0], fds[1]);
}

TEST(SignalPolicy, StopSignalsInstallsIt) {
  struct sigaction reset {};
  reset.sa_handler = SIG_DFL;
  sigemptyset(&reset.sa_mask);
  ASSERT_EQ(sigaction(SIGPIPE, &reset, nullptr), 0);
  StopSignals stop;
  struct sigaction now {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
}

#if !defined(__SANITIZE_ADDRESS__)
// A fatal signal leaves one line in the log's format, then kills the process by that signal.
TEST(SignalPolicyDeathTest, AFatalSignalLeavesALogLineAndKillsBySignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        InstallSignalPolicy();
        raise(SIGSEGV);
      },
      ::testing::KilledBySignal(SIGSEGV),
      R"(^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z ERROR process: )"
      R"(signal_policy_test died of fatal signal 11 \(SIGSEGV\))");
  EXPECT_EXIT(
      {
        InstallSignalPolicy();
        abort();
      },
      ::testing::KilledBySignal(SIGABRT), R"(died of fatal signal 6 \(SIGABRT\))");
}
#endif

TEST(SignalPolicy, NamesTheSignalsItHandles) {
  EXPECT_STREQ(FatalSignalName(SIGSEGV), "SIGSEGV");
  EXPECT_STREQ(FatalSignalName(SIGBUS), "SIGBUS");
  EXPECT_STREQ(FatalSignalName(SIGFPE), "SIGFPE");
  EXPECT_STREQ(FatalSignalName(SIGILL), "SIGILL");
  EXPECT_STREQ(FatalSignalName(SIGABRT), "SIGABRT");
  EXPECT_STREQ(FatalSignalName(SIGTERM), "unknown");
}

}  // namespace
}  // namespace gpupack
